// `tracer launch`: starts the local ranks of a distributed job as torchrun does (docs/distributed.md).
#pragma once
#include <string>
#include <vector>

struct LaunchArgs {
  int nproc = 1;       // ranks on this machine (node)
  int nnodes = 1;      // machines in the job
  int node_rank = 0;   // this machine's place among them
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port when nnodes is 1, else 29500
  double timeout_s = 300;  // the job's rendezvous and collective timeout (TRACER_DIST_TIMEOUT)
  bool exec = false;       // run the command as given (any program), not as tracer's subcommand
  std::vector<std::string> command;
};

// Starts nproc processes, each with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// MASTER_ADDR, MASTER_PORT and TRACER_DIST_TIMEOUT set, prefixes each line they print with their
// rank, and as soon as one fails stops the others. Returns 0 when every rank exited with 0, else
// the first failing rank's status (128 + the signal for a rank killed by one).
int cmd_launch(const LaunchArgs& a);
