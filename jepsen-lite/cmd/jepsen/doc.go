// Command jepsen runs one jepsen-lite scenario against real permitd
// binaries and writes its report; its exit status is the verdict (0 valid,
// 1 safety violation, 2 bad flags, 3 incomplete run, 4 not recovered).
//
//	go run ./jepsen-lite/cmd/jepsen --nodes 3 --workers 4 --workload strict \
//	    --nemesis partition,kill,pause,clock,loss --duration 60s --seed 1 --out jepsen-lite/out/run1
//
// --secure runs the same over TLS with API tokens. `jepsen sweep` runs
// many short runs over a seed range and every workload (package sweep):
//
//	go run ./jepsen-lite/cmd/jepsen sweep --seeds 1000-1049 --workloads strict,window,leased,multi \
//	    --duration 20s --out /tmp/jl-sweep
package main
