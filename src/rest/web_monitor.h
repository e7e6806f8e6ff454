// The REST endpoint and web UI (Flink's WebMonitorEndpoint): Flink's REST
// paths and JSON shapes over a Dispatcher, the dashboard's static files at
// "/", optional TLS and a bearer token for mutating calls. Served with
// Debian's cpp-httplib; JSON with nlohmann-json.
//
// Threads: start() returns once the port is bound; requests run on the
// server's own threads and call the Dispatcher from there. stop() (or the
// destructor) waits for requests in flight.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <sluice/core/config.h>
#include <sluice/core/status.h>

#include "rest/dispatcher.h"

namespace sluice::rest {

struct WebMonitorOptions {
  std::string bindAddress = "127.0.0.1";
  int port = 8081;  // 0: any free port
  bool ssl = false;
  std::string certificateFile;  // PEM (security.ssl.rest.keystore)
  std::string keyFile;          // PEM (security.ssl.rest.key)
  std::string token;            // rest.authentication.token; empty: no token needed
  int64_t refreshIntervalMs = 3000;
  bool submitEnabled = true;
  bool cancelEnabled = true;
  std::string mode = "embedded";  // or "cluster": shown in /config

  // rest.bind-address, rest.port, security.ssl.rest.*, rest.authentication.token, web.*.
  static WebMonitorOptions fromConfig(const Configuration& config);
};

class WebMonitor {
 public:
  WebMonitor(Dispatcher& dispatcher, WebMonitorOptions options);
  ~WebMonitor();
  WebMonitor(const WebMonitor&) = delete;
  WebMonitor& operator=(const WebMonitor&) = delete;

  // Binds and starts serving. Fails (naming the address and the OS error)
  // when the port cannot be bound or the TLS files cannot be loaded.
  Status start();
  void stop();
  // The bound port (after start()).
  int port() const;
  // "http://127.0.0.1:8081" or "https://...".
  std::string address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::rest
