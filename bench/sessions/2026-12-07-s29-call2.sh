set -u
T=.dev/tracer
echo "== conv profile"; TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=25 $T run bench/conv_probe.trace --entry resnet_block --device cuda --passes grad,fuse,del_last_used --bench 1 2>&1 | tail -60
echo "== special_torch cuda"; python3 tests/gpu/special_torch.py $T cuda | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== conv_torch cuda"; python3 tests/gpu/conv_torch.py $T cuda; echo "rc=$?"
echo "== conv_torch cpu"; python3 tests/gpu/conv_torch.py $T cpu | grep -v "^ok"; echo "rc=${PIPESTATUS[0]}"
echo "== sort torch"; python3 bench/sort_torch.py
echo "== conv2d_backward printout"; TRACER_GPU_PROFILE=2 TRACER_GPU_PROFILE_ROWS=10 $T run tests/thunder/conv2d_backward.txt --device cuda --bench 1 2>&1 | tail -25
