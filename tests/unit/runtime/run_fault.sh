#!/bin/sh
# run_fault.sh MPIEXEC TEST_FAULT MODE: runs test_fault with 3 ranks and asserts that the
# job fails (non-zero), within 30 s, with a message naming the failing rank and the
# step or op (MODE: hang, die, badshape); evalpause must instead succeed.
mpiexec=$1 prog=$2 mode=$3
start=$(date +%s)
out=$("$mpiexec" -n 3 --oversubscribe --allow-run-as-root "$prog" --iterations 5 \
      --step-timeout 3 "$mode" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "run_fault: mode $mode: exit status $rc after ${elapsed}s"
if [ "$mode" = evalpause ]; then
    [ "$rc" -eq 0 ] || { echo "FAIL: a long phase outside the steps was aborted"; exit 1; }
    echo "run_fault: PASS"; exit 0
fi
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
[ "$elapsed" -lt 30 ] || { echo "FAIL: took ${elapsed}s"; exit 1; }
case $mode in
hang) echo "$out" | grep -q "burstrt: rank [0-2]: watchdog: step 2 made no progress" ||
          { echo "FAIL: no watchdog message naming rank and step"; exit 1; } ;;
die)  echo "$out" | grep -Eq "rank 2 exits at step 2" &&
      echo "$out" | grep -Eq "(rank 2|process rank 2|\[\[[0-9]+,[0-9]+\],2\])" ||
          { echo "FAIL: no message naming the dead rank"; exit 1; } ;;
badshape) echo "$out" | grep -q "burstrt: rank 2: reshard: source has shape\[0\]=3 and 12 elements, expected 2 samples" ||
          { echo "FAIL: no message naming rank, op and cause"; exit 1; } ;;
esac
echo "run_fault: PASS"
