#include "nexmark/checksum.h"

#include <cinttypes>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace sluice::nexmark {

std::string Checksum::toString() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%" PRId64 " rows, sum %016" PRIx64, rows, sum);
  return buf;
}

uint64_t rowHash(const Person& p) {
  RowHasher h;
  h.add(p.id).add(p.name).add(p.emailAddress).add(p.creditCard).add(p.city).add(p.state);
  return h.add(p.dateTime).add(p.extra).finish();
}

uint64_t rowHash(const Auction& a) {
  RowHasher h;
  h.add(a.id).add(a.itemName).add(a.description).add(a.initialBid).add(a.reserve);
  return h.add(a.dateTime).add(a.expires).add(a.seller).add(a.category).add(a.extra).finish();
}

uint64_t rowHash(const Bid& b) {
  RowHasher h;
  h.add(b.auction).add(b.bidder).add(b.price).add(b.channel).add(b.url);
  return h.add(b.dateTime).add(b.extra).finish();
}

uint64_t rowHash(const Event& e) {
  switch (e.type) {
    case EventType::kPerson: return rowHash(e.person) ^ 0x1111;
    case EventType::kAuction: return rowHash(e.auction) ^ 0x2222;
    case EventType::kBid: break;
  }
  return rowHash(e.bid) ^ 0x3333;
}

uint64_t rowHash(const BidRow& r) {
  RowHasher h;
  return h.add(r.auction).add(r.bidder).add(r.price).add(r.dateTime).add(r.extra).finish();
}

uint64_t rowHash(const Q1Row& r) {
  RowHasher h;
  h.add(r.auction).add(r.bidder).add(r.priceThousandths).add(r.dateTime).add(r.extra);
  return h.finish();
}

uint64_t rowHash(const Q3Row& r) {
  RowHasher h;
  return h.add(r.name).add(r.city).add(r.state).add(r.auctionId).finish();
}

int64_t LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  auto rank = static_cast<int64_t>(q * static_cast<double>(count_));
  if (rank < 1) rank = 1;
  int64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen < rank) continue;
    if (i < 64) return static_cast<int64_t>(i);
    const auto e = static_cast<int>(i / 64) + 5;
    return static_cast<int64_t>((64 + i % 64) << (e - 6));
  }
  return 0;
}

Checksum keyCountChecksum(const std::map<int64_t, int64_t>& counts) {
  Checksum c;
  for (const auto& [k, n] : counts) c.add(rowHash(std::tuple<int64_t, int64_t>(k, n)));
  return c;
}

void ResultCollector::addLatestRows(const std::unordered_map<int64_t, uint64_t>& rows) {
  std::lock_guard lock(mu_);
  for (const auto& [key, hash] : rows) {
    if (!latestRows_.emplace(key, hash).second) {
      throw std::logic_error("nexmark: key " + std::to_string(key) +
                             " of an updating result reached two sink subtasks");
    }
  }
}

Checksum ResultCollector::result() const {
  std::lock_guard lock(mu_);
  if (!keyCounts_.empty()) return keyCountChecksum(keyCounts_);
  if (!latestRows_.empty()) {
    Checksum c;
    for (const auto& [key, hash] : latestRows_) c.add(hash);
    return c;
  }
  return checksum_;
}

}  // namespace sluice::nexmark
