// Command promql-selectors reads PromQL expressions, one JSON string per line on stdin, and
// prints for each a JSON object naming the series it selects: every vector or matrix
// selector's metric name with the label names it matches on, and the label names the
// expression groups, joins or aggregates by. A line that does not parse is an error that
// names the line, and the command exits 1.
//
// With `check-rules FILE...` it checks Prometheus rule files instead, as `promtool check
// rules` does: Prometheus's own rule-file reader, which refuses unknown fields, bad names,
// durations and labels, and every expression that does not parse.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// checkRules reports every problem of every file; false when there was one.
func checkRules(files []string) bool {
	ok := true
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	for _, f := range files {
		groups, errs := rulefmt.ParseFile(f, false, model.UTF8Validation, parser.NewParser(parser.Options{}), logger)
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, err)
			ok = false
		}
		if len(errs) == 0 {
			n := 0
			for _, g := range groups.Groups {
				n += len(g.Rules)
			}
			fmt.Printf("%s: %d rules found\n", f, n)
		}
	}
	return ok
}

type selector struct {
	Metric string   `json:"metric"`
	Labels []string `json:"labels"`
}

type answer struct {
	Selectors []selector `json:"selectors"`
	// Labels named in by/without, on/ignoring and group_left/group_right.
	Grouping []string `json:"grouping"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check-rules" {
		if !checkRules(os.Args[2:]) {
			os.Exit(1)
		}
		return
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	failed := false
	for n := 1; in.Scan(); n++ {
		var expr string
		if err := json.Unmarshal(in.Bytes(), &expr); err != nil {
			fmt.Fprintf(os.Stderr, "line %d: not a JSON string: %v\n", n, err)
			failed = true
			continue
		}
		a, err := inspect(expr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "line %d: %q: %v\n", n, expr, err)
			failed = true
			continue
		}
		if err := out.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

func inspect(expr string) (answer, error) {
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return answer{}, err
	}
	a := answer{Selectors: []selector{}, Grouping: []string{}}
	grouping := map[string]bool{}
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			s := selector{Labels: []string{}}
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName {
					s.Metric = m.Value
				} else {
					s.Labels = append(s.Labels, m.Name)
				}
			}
			if n.Name != "" {
				s.Metric = n.Name
			}
			a.Selectors = append(a.Selectors, s)
		case *parser.AggregateExpr:
			for _, l := range n.Grouping {
				grouping[l] = true
			}
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				for _, l := range n.VectorMatching.MatchingLabels {
					grouping[l] = true
				}
				for _, l := range n.VectorMatching.Include {
					grouping[l] = true
				}
			}
		}
		return nil
	})
	for l := range grouping {
		a.Grouping = append(a.Grouping, l)
	}
	sort.Strings(a.Grouping)
	return a, nil
}
