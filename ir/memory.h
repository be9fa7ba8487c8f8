// The memory estimator: walks a program's traces with their dels and predicts the CPU
// allocator's live and peak bytes, statement by statement.
#pragma once
#include <string>
#include <vector>

#include "ir/trace.h"

namespace tracer::ir {

struct MemPoint {
  int phase = 0;         // index of the trace (0: forward, 1: backward)
  size_t index = 0;      // statement index in that trace
  size_t live_bytes = 0; // after the statement (and its transient internals) ran
};

struct MemReport {
  size_t peak_bytes = 0;
  int peak_phase = 0;
  size_t peak_index = 0;
  std::string peak_stmt;       // the statement running at the peak
  size_t input_bytes = 0;      // the first trace's inputs, held by the caller throughout
  size_t saved_bytes = 0;      // tensors the forward hands to the backward, inputs excluded
  // ... of which, by their distribution over a job's ranks (docs/distributed.md); the rest is
  // not known.
  size_t saved_replicated_bytes = 0, saved_sharded_bytes = 0, saved_per_rank_bytes = 0;
  // Communication buffers (the results of collectives, until they die): live at the peak, and
  // the most live at any point.
  size_t peak_comm_bytes = 0, comm_peak_bytes = 0;
  std::vector<std::string> phases;  // trace names
  std::vector<MemPoint> timeline;
  std::vector<size_t> start_bytes;  // live bytes as each trace starts (before its first statement)
  // What is live at the peak, largest first: a name per storage (the first proxy holding it;
  // "(caller)" marks storage only the caller holds) and its bytes.
  std::vector<std::pair<std::string, size_t>> peak_live;
};

// The model, which the CPU executor and `tracer run` follow exactly:
// - the first trace's inputs are held by the caller for the whole program, but those it moves in
//   (Proxy::moved_in: a Thunder backward's collections), which a del frees;
// - a statement allocates its outputs while its inputs are live; a composite or fusion also holds
//   its intermediates until it finishes; prims.reshape shares its input's storage;
// - "del" frees a value unless something else still holds its storage;
// - at the end of a trace everything but its outputs is freed; the second trace's extra inputs
//   (cotangents) are allocated by the caller before it starts.
// describe_peak = false leaves peak_stmt and peak_live empty (one walk instead of two).
// allocation: the size an allocator gives a request (the CUDA allocator's granules,
// rt::cuda::allocation_size); null counts bytes exactly, as the CPU allocator does.
MemReport estimate_memory(const std::vector<const Trace*>& traces, bool describe_peak = true,
                          size_t (*allocation)(size_t) = nullptr);

}  // namespace tracer::ir
