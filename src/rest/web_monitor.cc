// The REST endpoint (rest/web_monitor.h): an httplib server (or, with
// security.ssl.rest.enabled, an httplib SSLServer) whose every request goes
// through one Router of Flink's paths (rest_router.h) to the handlers
// (rest_handlers.h); the response bodies are rendered in rest_json.h.
//
// Request flow: the pre-routing handler checks the bearer token of mutating
// calls and the body size before httplib reads a body (for a client that
// sends "Expect: 100-continue", before it sends one); dispatch() routes, or
// serves the dashboard's files, or answers 404; exceptions become 500.
#include "rest/web_monitor.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <sluice/core/config_options.h>

#include "core/logging.h"
#include "core/text.h"
#include "rest/rest_handlers.h"
#include "rest/rest_router.h"
#include "rest/web_assets.h"

namespace sluice::rest {
namespace {

// Job libraries are uploaded whole; every other body is a small JSON object.
constexpr size_t kUploadMaxBytes = size_t{512} << 20;
constexpr size_t kJsonMaxBytes = size_t{1} << 20;

using HandlerResponse = httplib::Server::HandlerResponse;

// Compares in time that depends only on the expected token's length.
bool tokenMatches(const std::string& expected, std::string_view given) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    diff |= static_cast<unsigned char>(expected[i] ^ g);
  }
  return diff == 0;
}

std::optional<uint64_t> contentLength(const httplib::Request& req) {
  if (!req.has_header("Content-Length")) return std::nullopt;
  const std::string v = req.get_header_value("Content-Length");
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return n;
}

std::string opensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

// OpenSSL's password callback: no password (an encrypted key does not load).
int noPassword(char*, int, int, void*) { return 0; }

bool readsAsPrivateKey(const std::string& file) {
  FILE* f = std::fopen(file.c_str(), "r");
  if (!f) return false;
  EVP_PKEY* key = PEM_read_PrivateKey(f, nullptr, noPassword, nullptr);
  std::fclose(f);
  if (!key) return false;
  EVP_PKEY_free(key);
  return true;
}

}  // namespace

WebMonitorOptions WebMonitorOptions::fromConfig(const Configuration& config) {
  WebMonitorOptions o;
  o.bindAddress = config.get(options::kRestBindAddress);
  o.port = config.get(options::kRestPort);
  o.ssl = config.get(options::kSecuritySslRestEnabled);
  o.certificateFile = config.get(options::kSecuritySslRestKeystore);
  o.keyFile = config.get(options::kSecuritySslRestKey);
  o.token = config.get(options::kRestAuthenticationToken);
  o.refreshIntervalMs = config.get(options::kWebRefreshInterval).count();
  o.submitEnabled = config.get(options::kWebSubmitEnable);
  o.cancelEnabled = config.get(options::kWebCancelEnable);
  return o;
}

struct WebMonitor::Impl {
  Impl(Dispatcher& d, WebMonitorOptions o)
      : options(std::move(o)), handlers(d, options, [this] { return address(); }) {
    handlers.addRoutes(router);
  }

  WebMonitorOptions options;
  RestHandlers handlers;
  Router router;
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  std::atomic<bool> listenReturned{false};
  std::string host;
  int boundPort = -1;

  void dispatch(const httplib::Request& req, httplib::Response& res) {
    try {
      const std::string path = normalizePath(req.path);
      if (router.dispatch(path, req, res)) return;
      if ((req.method == "GET" || req.method == "HEAD") && serveAsset(path, res)) return;
      sendError(res, 404, "Not found: " + escapeForMessage(req.path));
    } catch (const std::exception& e) {
      sendError(res, 500, std::string("Internal server error: ") + e.what());
    } catch (...) {
      sendError(res, 500, "Internal server error");
    }
  }

  bool serveAsset(const std::string& path, httplib::Response& res) {
    const WebAsset* a = findWebAsset(path == "/" ? "/index.html" : path);
    if (!a) return false;
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(std::string(a->data), std::string(a->contentType));
    return true;
  }

  // Before httplib reads a body: the token of mutating calls, and the size.
  HandlerResponse preRoute(const httplib::Request& req, httplib::Response& res) {
    const bool mutating = req.method != "GET" && req.method != "HEAD" && req.method != "OPTIONS";
    const bool chunked =
        req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    const auto length = contentLength(req);
    const bool hasBody = chunked || (length && *length > 0);
    if (mutating && !options.token.empty()) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string_view scheme = "bearer ";
      const bool bearer =
          auth.size() > scheme.size() && lowerAscii(auth.substr(0, scheme.size())) == scheme;
      std::string_view given = bearer ? std::string_view(auth).substr(scheme.size()) : "";
      while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
      if (!bearer || !tokenMatches(options.token, given)) {
        res.set_header("WWW-Authenticate", "Bearer realm=\"sluice\"");
        if (hasBody) res.set_header("Connection", "close");
        sendError(res, 401,
                  bearer ? std::string("The bearer token in the Authorization header is wrong")
                         : fmt::format("{} {} needs 'Authorization: Bearer <token>' "
                                       "(rest.authentication.token is set)",
                                       escapeForMessage(req.method), escapeForMessage(req.path)));
        return HandlerResponse::Handled;
      }
    }
    const bool upload = normalizePath(req.path) == "/jars/upload";
    if (!upload && hasBody) {
      if (chunked) {
        res.set_header("Connection", "close");
        sendError(res, 411,
                  "Send the request body with a Content-Length (chunked bodies are "
                  "only accepted by /jars/upload)");
        return HandlerResponse::Handled;
      }
      if (*length > kJsonMaxBytes) {
        res.set_header("Connection", "close");
        sendError(res, 413,
                  fmt::format("Request body of {} bytes is too large (at most {})", *length,
                              kJsonMaxBytes));
        return HandlerResponse::Handled;
      }
    }
    return HandlerResponse::Unhandled;
  }

  // ---- lifecycle ----

  std::string address() const {
    const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    return fmt::format("{}://{}:{}", options.ssl ? "https" : "http", h, boundPort);
  }

  Status makeTlsServer() {
    const auto readable = [](const std::string& file, const char* key) -> Status {
      if (file.empty()) {
        return Status::invalidArgument(
            fmt::format("security.ssl.rest.enabled is true but {} is not set", key));
      }
      std::ifstream in(file);
      if (!in) {
        return Status::ioError(
            fmt::format("cannot read {} '{}': {}", key, file, std::strerror(errno)));
      }
      return Status::ok();
    };
    SLUICE_RETURN_IF_ERROR(readable(options.certificateFile, "security.ssl.rest.keystore"));
    SLUICE_RETURN_IF_ERROR(readable(options.keyFile, "security.ssl.rest.key"));
    std::string error;
    const std::string cert = options.certificateFile;
    const std::string key = options.keyFile;
    auto tls = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
      ERR_clear_error();
      // An encrypted key fails instead of prompting on the terminal.
      SSL_CTX_set_default_passwd_cb(&ctx, noPassword);
      if (SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION) != 1) {
        error = "cannot require TLS 1.2: " + opensslErrors();
        return false;
      }
      if (SSL_CTX_use_certificate_chain_file(&ctx, cert.c_str()) != 1) {
        error = fmt::format("cannot load the certificate '{}' (security.ssl.rest.keystore): {}",
                            cert, opensslErrors());
        return false;
      }
      // Parsed on its own first, so that a bad file and a key of another
      // certificate get different messages.
      if (!readsAsPrivateKey(key)) {
        error = fmt::format("cannot load the private key '{}' (security.ssl.rest.key): {}", key,
                            opensslErrors());
        return false;
      }
      if (SSL_CTX_use_PrivateKey_file(&ctx, key.c_str(), SSL_FILETYPE_PEM) != 1 ||
          SSL_CTX_check_private_key(&ctx) != 1) {
        error = fmt::format(
            "the private key '{}' (security.ssl.rest.key) does not belong to the certificate "
            "'{}' (security.ssl.rest.keystore): {}",
            key, cert, opensslErrors());
        return false;
      }
      return true;
    });
    if (!tls->is_valid()) {
      return Status::invalidArgument(error.empty() ? "cannot set up TLS: " + opensslErrors()
                                                   : error);
    }
    server = std::move(tls);
    return Status::ok();
  }

  Status start() {
    if (server) return Status::invalidArgument("the REST endpoint is already started");
    if (options.port < 0 || options.port > 65535) {
      return Status::invalidArgument(
          fmt::format("rest.port: {} is not a port number (0-65535)", options.port));
    }
    host = options.bindAddress.empty() || options.bindAddress == "localhost" ? "127.0.0.1"
                                                                             : options.bindAddress;
    {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_PASSIVE;
      addrinfo* result = nullptr;
      const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
      if (rc != 0) {
        return Status::invalidArgument(fmt::format("rest.bind-address: cannot resolve '{}': {}",
                                                   escapeForMessage(options.bindAddress),
                                                   gai_strerror(rc)));
      }
      freeaddrinfo(result);
    }
    if (options.ssl) {
      SLUICE_RETURN_IF_ERROR(makeTlsServer());
    } else {
      server = std::make_unique<httplib::Server>();
    }
    httplib::Server& s = *server;
    // httplib's default also sets SO_REUSEPORT, which lets a second process
    // bind the same port without an error; SO_REUSEADDR alone does not.
    s.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    s.set_payload_max_length(kUploadMaxBytes);
    s.set_read_timeout(10, 0);
    s.set_write_timeout(10, 0);
    s.set_keep_alive_timeout(5);
    s.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return preRoute(req, res); });
    // A client that waits for "100 Continue" gets a refusal before it sends the body.
    // httplib calls this one outside its exception handling.
    s.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
      try {
        return preRoute(req, res) == HandlerResponse::Handled ? res.status : 100;
      } catch (...) {
        return 417;
      }
    });
    s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req,
                                                                httplib::Response& res) {
      if (!res.body.empty()) return HandlerResponse::Unhandled;
      std::string message;
      switch (res.status) {
        case 404: message = "Not found: " + escapeForMessage(req.path); break;
        case 413:
          message = fmt::format("Request body is too large (at most {} bytes)", kUploadMaxBytes);
          break;
        case 414: message = "Request URI is too long"; break;
        case 400:
          if ((req.method == "POST" || req.method == "PATCH" || req.method == "PUT") &&
              !req.has_header("Content-Length")) {
            message = fmt::format(
                "Bad request: {} {} needs a Content-Length header, 0 for no body (curl: -d '')",
                req.method, escapeForMessage(req.path));
            break;
          }
          message = "Bad request (400)";
          break;
        default: message = fmt::format("Bad request ({})", res.status); break;
      }
      sendError(res, res.status, message);
      return HandlerResponse::Handled;
    }));
    s.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "unknown exception";
          try {
            if (ep) std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          sendError(res, 500, "Internal server error: " + what);
        });
    s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      log::debug("REST {} {} -> {}", req.method, escapeForMessage(req.path), res.status);
    });
    const auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      dispatch(req, res);
    };
    s.Get(".*", handler);
    s.Post(".*", handler);
    s.Put(".*", handler);
    s.Patch(".*", handler);
    s.Delete(".*", handler);
    s.Options(".*", handler);

    errno = 0;
    if (options.port == 0) {
      boundPort = s.bind_to_any_port(host);
    } else {
      boundPort = s.bind_to_port(host, options.port) ? options.port : -1;
    }
    if (boundPort < 0) {
      const int err = errno;
      server.reset();
      return Status::ioError(
          fmt::format("cannot bind the REST endpoint to {}:{} (rest.bind-address, rest.port): {}",
                      host, options.port, err != 0 ? std::strerror(err) : "address unavailable"));
    }
    listenReturned = false;
    thread = std::thread([this] {
      log::setThreadName("rest");
      server->listen_after_bind();
      listenReturned = true;
    });
    // stop() before the server loop runs would not reach it.
    while (!server->is_running() && !listenReturned) std::this_thread::yield();
    log::info("REST endpoint and web UI at {}", address());
    return Status::ok();
  }

  void stop() {
    if (server) server->stop();
    if (thread.joinable()) thread.join();
    handlers.stop();
  }
};

WebMonitor::WebMonitor(Dispatcher& dispatcher, WebMonitorOptions options)
    : impl_(std::make_unique<Impl>(dispatcher, std::move(options))) {}

WebMonitor::~WebMonitor() { stop(); }

Status WebMonitor::start() { return impl_->start(); }

void WebMonitor::stop() { impl_->stop(); }

int WebMonitor::port() const { return impl_->boundPort; }

std::string WebMonitor::address() const { return impl_->address(); }

}  // namespace sluice::rest
