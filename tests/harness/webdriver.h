// A minimal W3C WebDriver client for browser tests: it starts Debian's
// chromedriver as a child process on a free 127.0.0.1 port, opens one
// headless Chromium session, and drives it over HTTP (httplib::Client,
// nlohmann::json).
//
//   sluice::test::WebDriver browser;             // chromedriver + a Chromium session
//   browser.navigate(url + "/#/jobs/" + jobId);
//   nlohmann::json n = browser.waitForScript(
//       "return document.querySelectorAll('[data-vertex-id]').length || null;");
//   browser.screenshot(buildDir / "dashboard.png");
//
// Failures (chromedriver does not start, a WebDriver command answers an
// error, a script throws) throw WebDriverError, which gtest reports as a
// failure of the running test. Waits poll with a deadline; nothing sleeps a
// fixed time to let the page settle.
//
// Ownership: the object owns the chromedriver process (started and stopped
// by pid), the browser session and its fresh --user-data-dir; the destructor
// ends the session, stops chromedriver, kills any browser process
// chromedriver left behind (by pid) and removes the profile directory. Use
// from one thread.
//
// Only browser tests include this header (it brings in httplib and
// nlohmann::json); the binary that includes it links PkgConfig::HTTPLIB so
// httplib's class layouts match the library's compile definitions.
#pragma once

#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

// ChildProcess lives in local_cluster.h, whose LocalCluster::binary() names
// SLUICE_BIN; browser tests in a binary without the sluice CLI do not use it.
#ifndef SLUICE_BIN
#define SLUICE_BIN ""
#define SLUICE_WEBDRIVER_DEFINED_SLUICE_BIN
#endif
#include "harness/local_cluster.h"
#ifdef SLUICE_WEBDRIVER_DEFINED_SLUICE_BIN
#undef SLUICE_BIN
#undef SLUICE_WEBDRIVER_DEFINED_SLUICE_BIN
#endif

namespace sluice::test {

class WebDriverError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct WebDriverOptions {
  std::string chromedriver = "/usr/bin/chromedriver";
  std::string chromium = "/usr/bin/chromium";
  int windowWidth = 1400;
  int windowHeight = 1000;
  // More Chromium flags, after the headless defaults.
  std::vector<std::string> extraArgs;
  // How long one WebDriver command (a navigation, a script) may take.
  std::chrono::seconds commandTimeout{120};
};

// A DOM element found by findElements: WebDriver's element reference.
struct WebElement {
  std::string id;
};

class WebDriver {
 public:
  // How W3C WebDriver marks an element reference in JSON.
  static constexpr const char* kElementKey = "element-6066-11e4-a52e-4f735466cecf";

  explicit WebDriver(WebDriverOptions options = {}) : options_(std::move(options)) { start(); }
  WebDriver(const WebDriver&) = delete;
  WebDriver& operator=(const WebDriver&) = delete;
  ~WebDriver() { quit(); }

  // Loads `url` and waits for its load event.
  void navigate(const std::string& url) { command("POST", "/url", {{"url", url}}); }

  std::string currentUrl() { return command("GET", "/url").get<std::string>(); }

  // Runs `js` as the body of a function (use `return`); `args` are its
  // arguments (`arguments[0]`, ...; one non-array value is the only
  // argument; pass an element with ref()). Returns the value as JSON (DOM
  // elements as WebDriver element references, see elementOf).
  nlohmann::json executeScript(const std::string& js,
                               const nlohmann::json& args = nlohmann::json::array()) {
    nlohmann::json list = args.is_array() ? args : nlohmann::json::array({args});
    return command("POST", "/execute/sync", {{"script", js}, {"args", list}});
  }

  // An element as a script argument.
  static nlohmann::json ref(const WebElement& e) { return {{kElementKey, e.id}}; }

  // The element a script returned.
  static WebElement elementOf(const nlohmann::json& e) {
    if (!e.is_object() || !e.contains(kElementKey))
      throw WebDriverError("not an element: " + e.dump());
    return WebElement{e[kElementKey].get<std::string>()};
  }

  // Runs `js` until it returns something other than null, false, 0 or "",
  // or until `timeout` passes (then throws with `what` and the last value).
  // Returns that value.
  nlohmann::json waitForScript(const std::string& js,
                               std::chrono::milliseconds timeout = std::chrono::seconds(60),
                               const std::string& what = "") {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    nlohmann::json last;
    for (;;) {
      last = executeScript(js);
      if (truthy(last)) return last;
      if (std::chrono::steady_clock::now() > deadline) {
        throw WebDriverError("timed out waiting for " + (what.empty() ? js : what) +
                             "; last value: " + last.dump());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  std::vector<WebElement> findElements(const std::string& css) {
    nlohmann::json r = command("POST", "/elements", {{"using", "css selector"}, {"value", css}});
    std::vector<WebElement> out;
    for (const auto& e : r) out.push_back(elementOf(e));
    return out;
  }

  // The rendered text of the element (as a user sees it).
  std::string text(const WebElement& e) {
    return command("GET", "/element/" + e.id + "/text").get<std::string>();
  }

  // The attribute's value, or "" when the element does not have it.
  std::string attribute(const WebElement& e, const std::string& name) {
    nlohmann::json v = command("GET", "/element/" + e.id + "/attribute/" + name);
    return v.is_string() ? v.get<std::string>() : std::string();
  }

  void click(const WebElement& e) {
    command("POST", "/element/" + e.id + "/click", nlohmann::json::object());
  }

  // Clicks the first element matching `css`; throws when there is none.
  void click(const std::string& css) {
    std::vector<WebElement> found = findElements(css);
    if (found.empty()) throw WebDriverError("no element matches " + css);
    click(found.front());
  }

  // Types `keys` into the element (an input).
  void sendKeys(const WebElement& e, const std::string& keys) {
    command("POST", "/element/" + e.id + "/value", {{"text", keys}});
  }

  // Writes a PNG of the viewport to `path` (creating its directory).
  void screenshot(const std::filesystem::path& path) {
    const std::string png = decodeBase64(command("GET", "/screenshot").get<std::string>());
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(png.data(), static_cast<std::streamsize>(png.size()));
    if (!out) throw WebDriverError("cannot write " + path.string());
  }

  // The browser's console messages since the last call: [{level, message,
  // timestamp}, ...] (chromedriver's log extension).
  nlohmann::json browserLog() { return command("POST", "/se/log", {{"type", "browser"}}); }

  // Ends the session and stops chromedriver; the destructor calls it.
  void quit() {
    if (!sessionId_.empty() && client_) {
      auto res = client_->Delete("/session/" + sessionId_);
      (void)res;
      sessionId_.clear();
    }
    // Browser processes chromedriver started and did not end with the
    // session: its direct children, by pid.
    std::vector<pid_t> children =
        driver_.running() ? childrenOf(driver_.pid()) : std::vector<pid_t>{};
    driver_.stop();
    for (pid_t p : children) ::kill(p, SIGKILL);
    client_.reset();
    if (!profileDir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(profileDir_, ec);
      profileDir_.clear();
    }
  }

  // chromedriver's port and output (for diagnosing a failed start).
  int port() const { return port_; }
  std::string driverOutput() const { return driver_.output(); }

 private:
  void start() {
    char tmpl[] = "/tmp/sluice-webdriver-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw WebDriverError("mkdtemp failed");
    profileDir_ = tmpl;
    port_ = freePort();
    driver_.start({options_.chromedriver, "--port=" + std::to_string(port_)},
                  profileDir_ / "chromedriver.out", profileDir_);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_connection_timeout(std::chrono::seconds(5));
    client_->set_read_timeout(options_.commandTimeout);
    client_->set_write_timeout(std::chrono::seconds(30));

    // Ready when GET /status says so.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      if (auto res = client_->Get("/status"); res && res->status == 200) {
        nlohmann::json s = nlohmann::json::parse(res->body, nullptr, false);
        if (s.is_object() && s["value"].value("ready", false)) break;
      }
      if (!driver_.running() || std::chrono::steady_clock::now() > deadline) {
        const std::string out = driver_.output();
        quit();
        throw WebDriverError(options_.chromedriver + " did not start:\n" + out);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }

    std::vector<std::string> args = {"--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-quic",
                                     "--no-first-run",
                                     "--disable-background-networking",
                                     "--disable-component-update",
                                     "--disable-sync",
                                     "--disable-dev-shm-usage",
                                     "--window-size=" + std::to_string(options_.windowWidth) + "," +
                                         std::to_string(options_.windowHeight),
                                     "--user-data-dir=" + (profileDir_ / "profile").string()};
    args.insert(args.end(), options_.extraArgs.begin(), options_.extraArgs.end());
    nlohmann::json caps = {
        {"capabilities",
         {{"alwaysMatch",
           {{"browserName", "chrome"},
            {"goog:chromeOptions", {{"binary", options_.chromium}, {"args", args}}},
            {"goog:loggingPrefs", {{"browser", "ALL"}}}}}}}};
    nlohmann::json r = send("POST", "/session", caps);
    sessionId_ = r.value("sessionId", "");
    if (sessionId_.empty()) {
      quit();
      throw WebDriverError("no session id in " + r.dump());
    }
  }

  // A command on the session: "/url" -> POST /session/<id>/url.
  nlohmann::json command(const std::string& method, const std::string& path,
                         const nlohmann::json& body = nullptr) {
    if (sessionId_.empty()) throw WebDriverError("no WebDriver session");
    return send(method, "/session/" + sessionId_ + path, body);
  }

  // Sends one request; returns the answer's "value", throws on an error.
  nlohmann::json send(const std::string& method, const std::string& path,
                      const nlohmann::json& body) {
    auto request = [&]() -> httplib::Result {
      if (method == "GET") return client_->Get(path);
      if (method == "DELETE") return client_->Delete(path);
      const nlohmann::json payload = body.is_null() ? nlohmann::json::object() : body;
      return client_->Post(path, payload.dump(), "application/json");
    };
    httplib::Result res = request();
    if (!res) {
      throw WebDriverError(method + " " + path + ": " + httplib::to_string(res.error()) +
                           "\nchromedriver output:\n" + driver_.output());
    }
    nlohmann::json answer = nlohmann::json::parse(res->body, nullptr, false);
    if (answer.is_discarded() || !answer.is_object()) {
      throw WebDriverError(method + " " + path + ": HTTP " + std::to_string(res->status) +
                           ", not JSON: " + res->body.substr(0, 500));
    }
    nlohmann::json value = answer.contains("value") ? answer["value"] : nlohmann::json();
    if (res->status != 200 || (value.is_object() && value.contains("error"))) {
      std::string error = value.is_object() ? value.value("error", "") : "";
      std::string message = value.is_object() ? value.value("message", "") : res->body;
      throw WebDriverError(method + " " + path + ": " + error + ": " + message);
    }
    return value;
  }

  static bool truthy(const nlohmann::json& v) {
    if (v.is_null()) return false;
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number()) return v.get<double>() != 0;
    if (v.is_string()) return !v.get<std::string>().empty();
    return true;
  }

  // A port no one listens on now (the kernel's pick for 127.0.0.1:0).
  static int freePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw WebDriverError("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(fd);
      throw WebDriverError("cannot find a free port");
    }
    ::close(fd);
    return ntohs(addr.sin_port);
  }

  // Direct children of `parent`, from /proc/<pid>/stat.
  static std::vector<pid_t> childrenOf(pid_t parent) {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(entry.path() / "stat");
      std::string stat;
      std::getline(in, stat);
      // pid (comm) state ppid ...: comm may hold spaces, so parse after ')'.
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 1));
      std::string state;
      long ppid = 0;
      if (rest >> state >> ppid && ppid == parent)
        out.push_back(static_cast<pid_t>(std::stol(name)));
    }
    return out;
  }

  static std::string decodeBase64(const std::string& in) {
    auto value = [](char c) -> int {
      if (c >= 'A' && c <= 'Z') return c - 'A';
      if (c >= 'a' && c <= 'z') return c - 'a' + 26;
      if (c >= '0' && c <= '9') return c - '0' + 52;
      if (c == '+') return 62;
      if (c == '/') return 63;
      return -1;
    };
    std::string out;
    out.reserve(in.size() * 3 / 4);
    uint32_t buffer = 0;
    int bits = 0;
    for (char c : in) {
      const int v = value(c);
      if (v < 0) continue;  // '=' padding, line breaks
      buffer = (buffer << 6) | static_cast<uint32_t>(v);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out.push_back(static_cast<char>((buffer >> bits) & 0xff));
      }
    }
    return out;
  }

  WebDriverOptions options_;
  ChildProcess driver_;
  std::unique_ptr<httplib::Client> client_;
  std::filesystem::path profileDir_;
  std::string sessionId_;
  int port_ = 0;
};

}  // namespace sluice::test
