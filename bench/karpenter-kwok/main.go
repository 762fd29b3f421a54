// upstream-loop is the Go half of scripts/bench-cluster-upstream, the whole-loop benchmark of
// upstream Karpenter's kwok provider on the real control plane.
//
//	upstream-loop instance-types -input INTERCHANGE -output FILE
//	    nodewright's catalog (interchange instanceTypes) as the kwok provider's instance types
//	upstream-loop run -kubeconfig F -instance-types F -karpenter-pid P -kwok-pid P [-pods N] [-to-zero]
//	    the measured scale-up and scale-downs; prints `bench cluster` lines
//
// The controller itself is upstream's own main (sigs.k8s.io/karpenter/kwok), built from this
// module's `tool` line; nothing of upstream's is copied here.
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
		input := fs.String("input", "", "an interchange document with instanceTypes")
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
		fs.IntVar(&c.pods, "pods", 1000, "inflate's replicas at the peak")
		fs.IntVar(&c.karpenterPID, "karpenter-pid", 0, "the controller's process")
		fs.IntVar(&c.kwokPID, "kwok-pid", 0, "kwok's process")
		fs.BoolVar(&c.toZero, "to-zero", false, "after N/2, also scale to 0 and wait for consolidation")
		_ = fs.Parse(os.Args[2:])
		if c.kubeconfig == "" || c.instanceTypes == "" || c.karpenterPID == 0 || c.pods < 2 {
			usageExit()
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = runLoop(ctx, c)
	default:
		usageExit()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream-loop:", err)
		os.Exit(1)
	}
}

func usageExit() {
	fmt.Fprintln(os.Stderr, "usage: upstream-loop instance-types -input F -output F | "+
		"run -kubeconfig F -instance-types F -karpenter-pid P [-kwok-pid P] [-pods N] [-to-zero]")
	os.Exit(2)
}
