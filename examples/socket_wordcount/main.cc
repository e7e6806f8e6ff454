// WordCount over lines read from a TCP socket, as Flink's
// SocketWindowWordCount reads them (without the window: counts are running
// totals). Start a server first, e.g. `nc -lk 9999`, then
//
//   socket_wordcount --hostname localhost --port 9999
//
// The job ends when the server closes the connection. The socket source is
// at-most-once: lines in flight when a job fails are lost.
#include <cctype>
#include <iostream>
#include <string>
#include <utility>

#include <sluice/sluice.h>

int main(int argc, char** argv) {
  try {
    auto env = sluice::StreamExecutionEnvironment::getExecutionEnvironment(argc, argv);
    std::string host = "localhost";
    int port = -1;
    const auto& args = env.getProgramArgs();
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--hostname" && i + 1 < args.size()) {
        host = args[++i];
      } else if (args[i] == "--port" && i + 1 < args.size()) {
        port = std::stoi(args[++i]);
      } else {
        std::cerr << "socket_wordcount: unknown argument '" << args[i] << "'\n";
        return 2;
      }
    }
    if (port < 0) {
      std::cerr << "socket_wordcount: no port given; usage: socket_wordcount --hostname HOST "
                   "--port PORT\n";
      return 2;
    }

    env.socketTextStream(host, port)
        .flatMap(
            [](const std::string& line, sluice::Collector<std::pair<std::string, int64_t>>& out) {
              std::string word;
              for (char ch : line + " ") {
                auto c = static_cast<unsigned char>(ch);
                if (std::isalnum(c)) {
                  word.push_back(static_cast<char>(std::tolower(c)));
                } else if (!word.empty()) {
                  out.collect({word, 1});
                  word.clear();
                }
              }
            })
        .keyBy([](const std::pair<std::string, int64_t>& wc) { return wc.first; })
        .sum(1)
        .print();
    env.execute("Socket WordCount");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "socket_wordcount: " << e.what() << "\n";
    return 1;
  }
}
