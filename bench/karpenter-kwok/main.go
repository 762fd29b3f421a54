// bench-loop is the Go half of scripts/bench-cluster-compare, the whole-loop benchmark of
// nodewright and of upstream Karpenter's kwok provider on the real control plane.
//
//	bench-loop instance-types -input CATALOG -output FILE
//	    nodewright's catalog (`nodewright catalog`) as the kwok provider's instance types
//	bench-loop run -kubeconfig F -instance-types F -side S -controller-pid P [-agent-pid P]
//	    [-pods N] [-consolidate-after D] [-result FILE]
//	    the measured scale-up and scale-downs of whichever controller runs; prints
//	    `bench cluster` lines and writes the figures as JSON
//	bench-loop table RESULT...
//	    the runs' figures as one Markdown table, best of the runs of each side
//
// Upstream's controller itself is its own main (sigs.k8s.io/karpenter/kwok), built from this
// module's requirements; nothing of upstream's is copied here.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usageExit()
	}
	var err error
	switch os.Args[1] {
	case "instance-types":
		fs := flag.NewFlagSet("instance-types", flag.ExitOnError)
		input := fs.String("input", "", "an interchange catalog (`nodewright catalog`)")
		output := fs.String("output", "", "where to write the kwok provider's instance types")
		_ = fs.Parse(os.Args[2:])
		if *input == "" || *output == "" {
			usageExit()
		}
		err = writeInstanceTypes(*input, *output)
	case "run":
		fs := flag.NewFlagSet("run", flag.ExitOnError)
		var c loopConfig
		fs.StringVar(&c.kubeconfig, "kubeconfig", "", "the control plane's admin kubeconfig")
		fs.StringVar(&c.instanceTypes, "instance-types", "", "the kwok provider's instance types (for prices)")
		fs.StringVar(&c.side, "side", "", "which controller runs (nodewright or upstream), for the report")
		fs.StringVar(&c.consolidateAfter, "consolidate-after", "", "the NodePool's consolidateAfter, for the report")
		fs.IntVar(&c.pods, "pods", 1000, "inflate's replicas at the peak")
		fs.IntVar(&c.controllerPID, "controller-pid", 0, "the controller's process")
		fs.IntVar(&c.agentPID, "agent-pid", 0, "a node agent's process, when it is not the controller (kwok)")
		fs.StringVar(&c.result, "result", "", "where to write the figures as JSON")
		fs.BoolVar(&c.scaleUpOnly, "scale-up-only", false, "stop at the peak (no scale-down)")
		_ = fs.Parse(os.Args[2:])
		if c.kubeconfig == "" || c.instanceTypes == "" || c.side == "" || c.controllerPID == 0 || c.pods < 2 {
			usageExit()
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = runLoop(ctx, c)
	case "table":
		var rs []result
		if rs, err = readResults(os.Args[2:]); err == nil {
			err = writeTable(os.Stdout, rs)
		}
	default:
		usageExit()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-loop:", err)
		os.Exit(1)
	}
}

func usageExit() {
	fmt.Fprintln(os.Stderr, "usage: bench-loop instance-types -input F -output F | "+
		"run -kubeconfig F -instance-types F -side S -controller-pid P [-agent-pid P] [-pods N] "+
		"[-consolidate-after D] [-result F] [-scale-up-only] | table RESULT...")
	os.Exit(2)
}
