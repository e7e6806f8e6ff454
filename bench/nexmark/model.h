// The Nexmark data model (Person, Auction, Bid, as in Flink's Nexmark
// benchmark) and the ad events of the Yahoo Streaming Benchmark, with their
// Sluice serializers.
//
// A Nexmark stream is one stream of Event, each holding exactly one of a
// Person, an Auction or a Bid (`type` says which; the other two members are
// default-constructed and not serialized). Times are int64 milliseconds of
// event time; prices are in cents, as in Nexmark.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <sluice/sluice.h>

namespace sluice::nexmark {

struct Person {
  int64_t id = 0;
  std::string name;
  std::string emailAddress;
  std::string creditCard;
  std::string city;
  std::string state;
  int64_t dateTime = 0;
  std::string extra;
};
SLUICE_STRUCT(Person, id, name, emailAddress, creditCard, city, state, dateTime, extra)

struct Auction {
  int64_t id = 0;
  std::string itemName;
  std::string description;
  int64_t initialBid = 0;
  int64_t reserve = 0;
  int64_t dateTime = 0;
  int64_t expires = 0;
  int64_t seller = 0;
  int64_t category = 0;
  std::string extra;
};
SLUICE_STRUCT(Auction, id, itemName, description, initialBid, reserve, dateTime, expires, seller,
              category, extra)

struct Bid {
  int64_t auction = 0;
  int64_t bidder = 0;
  int64_t price = 0;
  std::string channel;
  std::string url;
  int64_t dateTime = 0;
  std::string extra;
};
SLUICE_STRUCT(Bid, auction, bidder, price, channel, url, dateTime, extra)

enum class EventType : uint8_t { kPerson = 0, kAuction = 1, kBid = 2 };

// One Nexmark event: the member named by `type` is the payload; the other
// two are default-constructed (Flink's Event has null there). Copies and
// moves carry the payload only, as a union's would: an event is moved
// through a source chain once per record, and moving all three members (a
// dozen strings) cost more than the payload's few.
struct Event {
  EventType type = EventType::kBid;
  Person person;
  Auction auction;
  Bid bid;

  Event() = default;
  ~Event() = default;
  Event(const Event& o) : type(o.type) { assignPayload(o); }
  Event(Event&& o) noexcept : type(o.type) { assignPayload(std::move(o)); }
  Event& operator=(const Event& o) {
    if (this != &o) {
      if (type != o.type) resetPayload();
      type = o.type;
      assignPayload(o);
    }
    return *this;
  }
  Event& operator=(Event&& o) noexcept {
    if (this != &o) {
      if (type != o.type) resetPayload();
      type = o.type;
      assignPayload(std::move(o));
    }
    return *this;
  }

  // The event time of the payload.
  int64_t dateTime() const {
    switch (type) {
      case EventType::kPerson: return person.dateTime;
      case EventType::kAuction: return auction.dateTime;
      case EventType::kBid: break;
    }
    return bid.dateTime;
  }

 private:
  // The payload of `o` (an Event, as an lvalue or rvalue) into this one's.
  template <class E>
  void assignPayload(E&& o) {
    switch (o.type) {
      case EventType::kPerson: person = std::forward<E>(o).person; return;
      case EventType::kAuction: auction = std::forward<E>(o).auction; return;
      case EventType::kBid: break;
    }
    bid = std::forward<E>(o).bid;
  }
  // Back to default: the member that stops being the payload.
  void resetPayload() {
    switch (type) {
      case EventType::kPerson: person = Person{}; return;
      case EventType::kAuction: auction = Auction{}; return;
      case EventType::kBid: break;
    }
    bid = Bid{};
  }
};

// Yahoo Streaming Benchmark ad event. The original carries UUID strings for
// the ids; here they are dense integers so that the campaign table is a
// plain lookup (the join's cost is still one hash lookup per view).
struct AdEvent {
  int64_t userId = 0;
  int64_t pageId = 0;
  int64_t adId = 0;
  std::string adType;     // banner, modal, sponsored-search, mail, mobile
  std::string eventType;  // view, click, purchase
  int64_t eventTime = 0;
};
SLUICE_STRUCT(AdEvent, userId, pageId, adId, adType, eventType, eventTime)

}  // namespace sluice::nexmark

// Only the payload named by the tag goes on the wire.
template <>
struct sluice::TypeSerializer<sluice::nexmark::Event> {
  static constexpr size_t kMinEncodedSize = 1;
  static void serialize(const sluice::nexmark::Event& e, sluice::DataOutputView& out) {
    out.writeU8(static_cast<uint8_t>(e.type));
    switch (e.type) {
      case sluice::nexmark::EventType::kPerson:
        TypeSerializer<sluice::nexmark::Person>::serialize(e.person, out);
        return;
      case sluice::nexmark::EventType::kAuction:
        TypeSerializer<sluice::nexmark::Auction>::serialize(e.auction, out);
        return;
      case sluice::nexmark::EventType::kBid:
        TypeSerializer<sluice::nexmark::Bid>::serialize(e.bid, out);
        return;
    }
  }
  static void deserialize(sluice::nexmark::Event& e, sluice::DataInputView& in) {
    const uint8_t tag = in.readU8();
    switch (tag) {
      case 0:
        e.type = sluice::nexmark::EventType::kPerson;
        TypeSerializer<sluice::nexmark::Person>::deserialize(e.person, in);
        return;
      case 1:
        e.type = sluice::nexmark::EventType::kAuction;
        TypeSerializer<sluice::nexmark::Auction>::deserialize(e.auction, in);
        return;
      case 2:
        e.type = sluice::nexmark::EventType::kBid;
        TypeSerializer<sluice::nexmark::Bid>::deserialize(e.bid, in);
        return;
      default: throw sluice::SluiceException("nexmark Event: bad type tag " + std::to_string(tag));
    }
  }
  static std::string schema() {
    return "nexmark.Event{" + TypeSerializer<sluice::nexmark::Person>::schema() + "|" +
           TypeSerializer<sluice::nexmark::Auction>::schema() + "|" +
           TypeSerializer<sluice::nexmark::Bid>::schema() + "}";
  }
};
