// The handlers of Flink's REST paths (GET /jobs/:jobid, PATCH /jobs/:jobid,
// POST /jobs/:jobid/savepoints, /jars/..., ...) over a Dispatcher. Internal to
// rest/web_monitor, which routes requests to them after the bearer token and
// body size are checked. Handlers run on the server's threads; savepoints run
// on threads of their own, which stop() waits for.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "rest/dispatcher.h"
#include "rest/rest_router.h"

namespace sluice::rest {

struct WebMonitorOptions;

class RestHandlers {
 public:
  // `address`: the endpoint's URL once bound (GET /jars shows it).
  RestHandlers(Dispatcher& dispatcher, const WebMonitorOptions& options,
               std::function<std::string()> address);
  ~RestHandlers();

  void addRoutes(Router& router);
  // Waits for the savepoints still running; triggers fail afterwards.
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::rest
