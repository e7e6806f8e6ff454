// The web dashboard's built files (web/dashboard/dist), compiled into the
// binary so that the JobManager and embedded jobs serve it without any file
// on disk. Generated at build time by cmake/EmbedWebAssets.cmake.
#pragma once

#include <string_view>

namespace sluice::rest {

struct WebAsset {
  std::string_view path;         // "/index.html", "/assets/app.js"
  std::string_view contentType;  // "text/html; charset=utf-8", ...
  std::string_view data;
};

// The asset at `path`, or null.
const WebAsset* findWebAsset(std::string_view path);

}  // namespace sluice::rest
