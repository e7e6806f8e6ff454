// The one header a Sluice job includes.
//
// Sluice runs Apache Flink's DataStream model in C++: build a pipeline on a
// StreamExecutionEnvironment, then execute() it. See docs/datastream-api.md.
#pragma once

#include <sluice/broadcast.h>
#include <sluice/checkpointed_function.h>
#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/core/key_hash.h>
#include <sluice/core/runtime_context.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/datastream.h>
#include <sluice/environment.h>
#include <sluice/file_sink.h>
#include <sluice/format.h>
#include <sluice/functions.h>
#include <sluice/joins.h>
#include <sluice/sink.h>
#include <sluice/sinks.h>
#include <sluice/source.h>
#include <sluice/sources.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/operator_state.h>
#include <sluice/state/state.h>
#include <sluice/streaming_runtime_context.h>
#include <sluice/timers.h>
#include <sluice/two_phase_commit.h>
#include <sluice/watermarks.h>
#include <sluice/windowed_stream.h>
#include <sluice/windows.h>
