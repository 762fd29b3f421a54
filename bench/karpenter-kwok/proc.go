// A process's CPU seconds and peak RSS from /proc, read the way nodewright's cluster benchmark
// reads its controller's.

package main

import (
	"os"
	"strconv"
	"strings"
)

// usage returns utime+stime of pid in seconds and its peak RSS (VmHWM) in MiB; zeros when the
// process is gone.
func usage(pid int) (cpuSeconds, rssMiB float64) {
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	// The command name may hold spaces: fields are counted after its closing parenthesis.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 {
		fields := strings.Fields(string(stat)[i+1:])
		for _, f := range []int{11, 12} {
			if f < len(fields) {
				ticks, _ := strconv.ParseFloat(fields[f], 64)
				// USER_HZ is 100 on Linux.
				cpuSeconds += ticks / 100
			}
		}
	}
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kib, _ := strconv.ParseFloat(f[0], 64)
				rssMiB = kib / 1024
			}
		}
	}
	return cpuSeconds, rssMiB
}

// cpuSoFar is pid's CPU seconds until now: printed at each phase's end, so a run shows where
// its controller's CPU went (start-up and scale-up, each scale-down and its quiet minutes).
func cpuSoFar(pid int) float64 {
	cpu, _ := usage(pid)
	return cpu
}
