#!/usr/bin/env bash
# Session 22 call 1: session 21's call 8 (step_clipped on cuda, GPT-2 small's step with clip 1.0,
# fused and unfused clipping, PyTorch's step in the same call), then the two-stream overlap probe
# (how much of an optimizer update can hide behind the backward's matmuls). Carry [".dev"].
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bash bench/sessions/2026-12-06-s21-call8.sh
timeout 120 python3 bench/probes/overlap_probe.py 2>&1 | tail -3
