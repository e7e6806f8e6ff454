#include "nexmark/generator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace sluice::nexmark {
namespace {

constexpr int64_t kPersonProportion = 1;
constexpr int64_t kAuctionProportion = 3;
constexpr int64_t kBidProportion = 46;
constexpr int64_t kTotalProportion = kPersonProportion + kAuctionProportion + kBidProportion;

constexpr int64_t kNumActivePeople = 1000;
constexpr int64_t kPersonIdLead = 10;
constexpr int64_t kNumInFlightAuctions = 100;
constexpr int64_t kAuctionIdLead = 10;
// A hot seller / auction / bidder is the latest id rounded down to a multiple
// of these.
constexpr int64_t kHotSellerRatio = 100;
constexpr int64_t kHotAuctionRatio = 100;
constexpr int64_t kHotBidderRatio = 100;
// 1 in these is not hot.
constexpr int64_t kHotSellersOneIn = 4;
constexpr int64_t kHotAuctionsOneIn = 2;
constexpr int64_t kHotBiddersOneIn = 4;

constexpr int64_t kAvgPersonBytes = 200;
constexpr int64_t kAvgAuctionBytes = 500;
constexpr int64_t kAvgBidBytes = 100;
constexpr int64_t kMinStringLength = 3;

constexpr std::array<std::string_view, 6> kStates = {"AZ", "CA", "ID", "OR", "WA", "WY"};
constexpr std::array<std::string_view, 10> kCities = {
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland",
    "Bend",    "Redmond",     "Seattle",       "Kent",  "Cheyenne"};
constexpr std::array<std::string_view, 11> kFirstNames = {
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"};
constexpr std::array<std::string_view, 9> kLastNames = {
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"};
constexpr std::array<std::string_view, 4> kHotChannels = {"Google", "Facebook", "Baidu", "Apple"};
constexpr std::array<std::string_view, 5> kAdTypes = {"banner", "modal", "sponsored-search", "mail",
                                                      "mobile"};
constexpr std::array<std::string_view, 3> kAdEventTypes = {"view", "click", "purchase"};

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// splitmix64, seeded per event.
class Random {
 public:
  Random(uint64_t seed, int64_t index)
      : state_(mix64(seed ^ mix64(static_cast<uint64_t>(index) + 0x632BE59BD9B4E019ULL))) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return mix64(state_);
  }
  // Uniform in [0, bound), bound > 0.
  int64_t nextInt(int64_t bound) {
    return static_cast<int64_t>(
        (static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(bound)) >> 64);
  }
  double nextDouble() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Lower-case letters with a space now and then; 12 characters per draw.
  void appendString(std::string& out, int64_t length) {
    static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz abcde";
    const size_t from = out.size();
    out.resize(from + static_cast<size_t>(length));
    char* p = out.data() + from;
    char* const end = p + length;
    while (p < end) {
      uint64_t bits = next();
      for (int k = 0; k < 12 && p < end; ++k, bits >>= 5) *p++ = kAlphabet[bits & 31];
    }
  }
  // 3 to maxLength - 1 characters (maxLength > 3), as Nexmark's nextString.
  void appendNextString(std::string& out, int64_t maxLength) {
    appendString(out, kMinStringLength + nextInt(maxLength - kMinStringLength));
  }
  std::string nextString(int64_t maxLength) {
    std::string s;
    appendNextString(s, maxLength);
    return s;
  }
  // Padding that brings an event of `currentSize` bytes to `desiredAverage`
  // bytes on average (+/- 20 %), sized as Nexmark's nextExtra sizes it.
  std::string nextExtra(int64_t currentSize, int64_t desiredAverage) {
    std::string s;
    if (currentSize > desiredAverage) return s;
    const int64_t desired = desiredAverage - currentSize;
    const int64_t delta = std::llround(static_cast<double>(desired) * 0.2);
    appendString(s, desired - delta + (delta == 0 ? 0 : nextInt(2 * delta)));
    return s;
  }
  // 10^(6u) as 2^(6u log2 10): the same distribution, and exp2 costs a
  // fraction of pow.
  int64_t nextPrice() {
    static constexpr double kLog2Of10 = 3.321928094887362347870319429489390175864831393;
    return static_cast<int64_t>(std::llround(std::exp2(nextDouble() * 6.0 * kLog2Of10) * 100.0));
  }

 private:
  uint64_t state_;
};

// The base-0 id of the last person created at or before event `index`.
int64_t lastBase0PersonId(int64_t index) {
  const int64_t epoch = index / kTotalProportion;
  const int64_t offset = std::min(index % kTotalProportion, kPersonProportion - 1);
  return epoch * kPersonProportion + offset;
}

// The base-0 id of the last auction created at or before event `index`
// (-1 before the first).
int64_t lastBase0AuctionId(int64_t index) {
  int64_t epoch = index / kTotalProportion;
  int64_t offset = index % kTotalProportion;
  if (offset < kPersonProportion) {
    --epoch;
    offset = kAuctionProportion - 1;
  } else if (offset >= kPersonProportion + kAuctionProportion) {
    offset = kAuctionProportion - 1;
  } else {
    offset -= kPersonProportion;
  }
  return epoch * kAuctionProportion + offset;
}

// A recent person (or one a few ids ahead of the newest).
int64_t nextBase0PersonId(int64_t index, Random& rnd) {
  const int64_t numPeople = lastBase0PersonId(index) + 1;
  const int64_t active = std::min(numPeople, kNumActivePeople);
  return numPeople - active + rnd.nextInt(active + kPersonIdLead);
}

// An auction in flight (or one a few ids ahead of the newest).
int64_t nextBase0AuctionId(int64_t index, Random& rnd) {
  const int64_t maxAuction = std::max<int64_t>(lastBase0AuctionId(index), 0);
  const int64_t minAuction = std::max<int64_t>(maxAuction - kNumInFlightAuctions, 0);
  return minAuction + rnd.nextInt(maxAuction - minAuction + 1 + kAuctionIdLead);
}

Person nextPerson(int64_t index, int64_t ts, Random& rnd) {
  Person p;
  p.id = lastBase0PersonId(index) + kFirstPersonId;
  p.name.reserve(16);
  p.name.append(kFirstNames[static_cast<size_t>(rnd.nextInt(kFirstNames.size()))]);
  p.name.push_back(' ');
  p.name.append(kLastNames[static_cast<size_t>(rnd.nextInt(kLastNames.size()))]);
  p.emailAddress = rnd.nextString(7);
  p.emailAddress.push_back('@');
  rnd.appendNextString(p.emailAddress, 5);
  p.emailAddress.append(".com");
  char card[24];
  const int64_t g0 = rnd.nextInt(10000), g1 = rnd.nextInt(10000), g2 = rnd.nextInt(10000),
                g3 = rnd.nextInt(10000);
  std::snprintf(card, sizeof card, "%04d %04d %04d %04d", static_cast<int>(g0),
                static_cast<int>(g1), static_cast<int>(g2), static_cast<int>(g3));
  p.creditCard = card;
  p.city = kCities[static_cast<size_t>(rnd.nextInt(kCities.size()))];
  p.state = kStates[static_cast<size_t>(rnd.nextInt(kStates.size()))];
  p.dateTime = ts;
  // Nexmark counts the id and the strings, not the dateTime.
  const auto size = static_cast<int64_t>(8 + p.name.size() + p.emailAddress.size() +
                                         p.creditCard.size() + p.city.size() + p.state.size());
  p.extra = rnd.nextExtra(size, kAvgPersonBytes);
  return p;
}

Auction nextAuction(const GeneratorConfig& config, int64_t index, int64_t ts, Random& rnd) {
  Auction a;
  a.id = lastBase0AuctionId(index) + kFirstAuctionId;
  const int64_t seller = rnd.nextInt(kHotSellersOneIn) > 0
                             ? (lastBase0PersonId(index) / kHotSellerRatio) * kHotSellerRatio
                             : nextBase0PersonId(index, rnd);
  a.seller = seller + kFirstPersonId;
  a.category = kFirstCategoryId + rnd.nextInt(kNumCategories);
  a.itemName = rnd.nextString(20);
  a.description = rnd.nextString(100);
  a.initialBid = rnd.nextPrice();
  a.reserve = a.initialBid + rnd.nextPrice();
  a.dateTime = ts;
  // About the time the next kNumInFlightAuctions auctions take to appear.
  const int64_t horizonEvents = kNumInFlightAuctions * kTotalProportion / kAuctionProportion;
  const int64_t horizonMs = eventTimestamp(config, index + horizonEvents) - ts;
  a.expires = ts + 1 + rnd.nextInt(std::max<int64_t>(horizonMs * 2, 1));
  // Nexmark counts the id, the two strings and five 8-byte fields.
  const auto size = static_cast<int64_t>(8 + a.itemName.size() + a.description.size() + 8 * 5);
  a.extra = rnd.nextExtra(size, kAvgAuctionBytes);
  return a;
}

Bid nextBid(int64_t index, int64_t ts, Random& rnd) {
  Bid b;
  const int64_t auction =
      rnd.nextInt(kHotAuctionsOneIn) > 0
          ? (std::max<int64_t>(lastBase0AuctionId(index), 0) / kHotAuctionRatio) * kHotAuctionRatio
          : nextBase0AuctionId(index, rnd);
  b.auction = auction + kFirstAuctionId;
  const int64_t bidder = rnd.nextInt(kHotBiddersOneIn) > 0
                             ? (lastBase0PersonId(index) / kHotBidderRatio) * kHotBidderRatio + 1
                             : nextBase0PersonId(index, rnd);
  b.bidder = bidder + kFirstPersonId;
  b.price = rnd.nextPrice();
  if (rnd.nextInt(2) > 0) {
    const auto hot = static_cast<size_t>(rnd.nextInt(kHotChannels.size()));
    b.channel = kHotChannels[hot];
    b.url = "https://www.nexmark.com/";
    b.url.append(kHotChannels[hot]);
    b.url.append("/item.htm?query=1");
  } else {
    const std::string channel = std::to_string(rnd.nextInt(10'000));
    b.channel = "channel-";
    b.channel.append(channel);
    b.url = "https://www.nexmark.com/";
    rnd.appendString(b.url, 5);
    b.url.append("/item.htm?query=1&channel_id=");
    b.url.append(channel);
  }
  b.dateTime = ts;
  // Nexmark sizes a bid's padding by its four 8-byte fields only, channel and
  // url aside, so a bid is about 100 bytes plus those two.
  b.extra = rnd.nextExtra(8 * 4, kAvgBidBytes);
  return b;
}

}  // namespace

int64_t eventTimestamp(const GeneratorConfig& config, int64_t index) {
  // Split to stay exact and overflow-free for any index.
  const int64_t rate = config.eventsPerSecond;
  return config.baseTime + (index / rate) * 1000 + (index % rate) * 1000 / rate;
}

Event generateEvent(const GeneratorConfig& config, int64_t index) {
  Random rnd(config.seed, index);
  const int64_t ts = eventTimestamp(config, index);
  const int64_t rem = index % kTotalProportion;
  Event e;
  if (rem < kPersonProportion) {
    e.type = EventType::kPerson;
    e.person = nextPerson(index, ts, rnd);
  } else if (rem < kPersonProportion + kAuctionProportion) {
    e.type = EventType::kAuction;
    e.auction = nextAuction(config, index, ts, rnd);
  } else {
    e.type = EventType::kBid;
    e.bid = nextBid(index, ts, rnd);
  }
  return e;
}

int64_t interleavedIndex(int64_t position, int64_t count, int parallelism) {
  if (parallelism <= 1) return position;  // one split: no divisions per event
  const int64_t p = parallelism;
  const int64_t base = count / p;
  const int64_t extra = count % p;
  // Splits 0..extra-1 hold base + 1 positions, the others base.
  const int64_t big = extra * (base + 1);
  int64_t split = 0;
  int64_t offset = 0;
  if (position < big) {
    split = position / (base + 1);
    offset = position % (base + 1);
  } else {
    split = extra + (position - big) / base;
    offset = (position - big) % base;
  }
  return offset * p + split;
}

AdEvent generateAdEvent(const GeneratorConfig& config, int64_t index) {
  Random rnd(config.seed ^ 0x5953'4200ULL, index);  // "YSB"
  AdEvent e;
  e.userId = rnd.nextInt(100'000);
  e.pageId = rnd.nextInt(100'000);
  e.adId = rnd.nextInt(kYsbCampaigns * kYsbAdsPerCampaign);
  e.adType = kAdTypes[static_cast<size_t>(rnd.nextInt(kAdTypes.size()))];
  e.eventType = kAdEventTypes[static_cast<size_t>(rnd.nextInt(kAdEventTypes.size()))];
  e.eventTime = eventTimestamp(config, index);
  return e;
}

std::vector<int64_t> ysbCampaignOfAd(const GeneratorConfig& config) {
  const int64_t ads = kYsbCampaigns * kYsbAdsPerCampaign;
  std::vector<int64_t> campaign(static_cast<size_t>(ads));
  for (int64_t ad = 0; ad < ads; ++ad) campaign[static_cast<size_t>(ad)] = ad / kYsbAdsPerCampaign;
  // Fisher-Yates with the generator's random source, so the table depends on
  // the seed only.
  Random rnd(config.seed ^ 0x43414D50ULL, -1);  // "CAMP"
  for (int64_t i = ads - 1; i > 0; --i) {
    std::swap(campaign[static_cast<size_t>(i)], campaign[static_cast<size_t>(rnd.nextInt(i + 1))]);
  }
  return campaign;
}

}  // namespace sluice::nexmark
