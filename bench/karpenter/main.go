// karpenter-bench runs upstream Karpenter's provisioning scheduler on scheduling problems in
// nodewright's interchange format and writes its plans in the interchange output format, so
// the two planners can be compared on identical inputs.
//
//	karpenter-bench -input FILE [-runs N]   one problem, best of N solves, one JSON document
//	karpenter-bench -serve                  one input path per stdin line, one solve each,
//	                                        one JSON line per answer (for `nodewright bench compare`)
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"sigs.k8s.io/karpenter/pkg/operator/logging"
)

func main() {
	input := flag.String("input", "", "an interchange input document")
	runs := flag.Int("runs", 1, "solves of -input; the fastest is reported")
	serve := flag.Bool("serve", false, "read input paths from stdin, answer each with one JSON line")
	flag.Parse()
	log.SetLogger(logging.NopLogger)
	var err error
	switch {
	case *serve:
		err = serveLines(os.Stdin, os.Stdout)
	case *input != "":
		err = solveFile(*input, *runs, os.Stdout)
	default:
		err = fmt.Errorf("give -input FILE or -serve")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "karpenter-bench: %v\n", err)
		os.Exit(1)
	}
}

func solveFile(path string, runs int, out io.Writer) error {
	p, err := readProblem(path)
	if err != nil {
		return err
	}
	var best *run
	for i := 0; i < max(runs, 1); i++ {
		r, err := solveOnce(p)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if best == nil || r.solve < best.solve {
			best = r
		}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(output(p, best))
}

// serveLines answers one input path per line. Problems are read once and kept, so a caller
// alternating between planners pays for parsing only on the first solve of each input.
func serveLines(in io.Reader, out io.Writer) error {
	problems := map[string]*problem{}
	lines := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for lines.Scan() {
		path := strings.TrimSpace(lines.Text())
		if path == "" {
			continue
		}
		answer, err := serveOne(problems, path)
		if err != nil {
			answer = map[string]any{"error": err.Error()}
		}
		if err := enc.Encode(answer); err != nil {
			return err
		}
	}
	return lines.Err()
}

func serveOne(problems map[string]*problem, path string) (map[string]any, error) {
	p, ok := problems[path]
	if !ok {
		var err error
		if p, err = readProblem(path); err != nil {
			return nil, err
		}
		problems[path] = p
	}
	r, err := solveOnce(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return output(p, r), nil
}

// karpenterVersion is the version of sigs.k8s.io/karpenter this binary was built with.
func karpenterVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "sigs.k8s.io/karpenter" {
				return dep.Version
			}
		}
	}
	return "(unknown version)"
}
