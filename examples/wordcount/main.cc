// Streaming WordCount, as in Flink's examples: lines -> words -> running
// count per word.
//
//   wordcount                      counts the bundled text (Hamlet's soliloquy)
//   wordcount --input PATH         counts a file, or every file in a directory
//   wordcount --output PATH        writes the counts to PATH instead of stdout
//   wordcount -p 4 -D execution.buffer-timeout=10ms ...   any Flink-style setting
//
// Like Flink's streaming WordCount it prints every update: "(be,1)" then,
// when "be" appears again, "(be,2)".
#include <cctype>
#include <iostream>
#include <string>
#include <utility>

#include <sluice/sluice.h>

namespace {

// Lower-cases a line and splits it on everything that is not a letter or a
// digit (Flink's example splits on \W+).
void tokenize(const std::string& line, sluice::Collector<std::pair<std::string, int64_t>>& out) {
  std::string word;
  for (char ch : line) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      word.push_back(static_cast<char>(std::tolower(c)));
    } else if (!word.empty()) {
      out.collect({word, 1});
      word.clear();
    }
  }
  if (!word.empty()) out.collect({word, 1});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto env = sluice::StreamExecutionEnvironment::getExecutionEnvironment(argc, argv);
    std::string input = SLUICE_WORDCOUNT_DEFAULT_INPUT;
    std::string output;
    const auto& args = env.getProgramArgs();
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--input" && i + 1 < args.size()) {
        input = args[++i];
      } else if (args[i] == "--output" && i + 1 < args.size()) {
        output = args[++i];
      } else {
        std::cerr << "wordcount: unknown argument '" << args[i]
                  << "' (expected --input PATH, --output PATH, -p N, -D key=value)\n";
        return 2;
      }
    }

    auto counts = env.readTextFile(input)
                      .flatMap(tokenize)
                      .name("Tokenizer")
                      .keyBy<0>()
                      .sum(1)
                      .name("Counter");
    if (output.empty()) {
      counts.print();
    } else {
      counts.writeAsText(output, sluice::WriteMode::kOverwrite);
    }
    env.execute("Streaming WordCount");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "wordcount: " << e.what() << "\n";
    return 1;
  }
}
