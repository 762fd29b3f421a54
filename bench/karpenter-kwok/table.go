// The whole-loop comparison's table: the runs' result files, grouped by consolidateAfter and
// side, each row the best (lowest) of the group's runs, as one Markdown table.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// The sides in the order their columns appear.
var sideOrder = []string{"nodewright", "upstream"}

func readResults(paths []string) ([]result, error) {
	var out []result
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r result
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if r.Side == "" || r.Pods == 0 {
			return nil, fmt.Errorf("%s: side and pods are required", p)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no results")
	}
	return out, nil
}

type column struct {
	side, consolidateAfter string
	runs                   []result
}

// columns groups the runs: consolidateAfter in the order first seen, then side.
func columns(rs []result) []column {
	var afters []string
	for _, r := range rs {
		if !slices.Contains(afters, r.ConsolidateAfter) {
			afters = append(afters, r.ConsolidateAfter)
		}
	}
	var out []column
	for _, a := range afters {
		sides := slices.Clone(sideOrder)
		for _, r := range rs {
			if !slices.Contains(sides, r.Side) {
				sides = append(sides, r.Side)
			}
		}
		for _, s := range sides {
			c := column{side: s, consolidateAfter: a}
			for _, r := range rs {
				if r.Side == s && r.ConsolidateAfter == a {
					c.runs = append(c.runs, r)
				}
			}
			if len(c.runs) > 0 {
				out = append(out, c)
			}
		}
	}
	return out
}

// best is the run with the lowest key; with several runs the cell lists every run's value
// after the best, in run order.
func best(runs []result, key func(result) float64, cell func(result) string) string {
	b := runs[0]
	for _, r := range runs[1:] {
		if key(r) < key(b) {
			b = r
		}
	}
	if len(runs) == 1 {
		return cell(b)
	}
	all := make([]string, len(runs))
	for i, r := range runs {
		all[i] = cell(r)
	}
	return fmt.Sprintf("%s (runs: %s)", cell(b), strings.Join(all, "; "))
}

type row struct {
	name string
	key  func(result) float64
	cell func(result) string
}

func rows(pods int) []row {
	seconds := func(f func(result) float64) row {
		return row{key: f, cell: func(r result) string { return fmt.Sprintf("%.1f s", f(r)) }}
	}
	nodesCost := func(f func(result) state) row {
		return row{key: func(r result) float64 { return f(r).Cost },
			cell: func(r result) string { return fmt.Sprintf("%d, $%.3f/h", f(r).Nodes, f(r).Cost) }}
	}
	named := func(name string, r row) row { r.name = name; return r }
	return []row{
		named("all pods bound after the last was created", seconds(func(r result) float64 { return r.BoundAfterLast })),
		named("nodes and $/h at the peak", nodesCost(func(r result) state { return r.Peak })),
		named(fmt.Sprintf("%d → %d: consolidation done after the scale", pods, pods/2),
			seconds(func(r result) float64 { return r.Half.Seconds })),
		named("nodes and $/h after", nodesCost(func(r result) state { return r.Half.state })),
		named(fmt.Sprintf("%d → 0: consolidation done after the scale", pods/2),
			seconds(func(r result) float64 { return r.Zero.Seconds })),
		named("nodes and $/h after", nodesCost(func(r result) state { return r.Zero.state })),
		named("controller CPU, whole run", seconds(func(r result) float64 { return r.ControllerCPU })),
		{name: "controller peak RSS", key: func(r result) float64 { return r.ControllerRSS },
			cell: func(r result) string { return fmt.Sprintf("%.0f MiB", r.ControllerRSS) }},
		{name: "node agent CPU and peak RSS", key: func(r result) float64 { return r.AgentCPU },
			cell: func(r result) string {
				if r.AgentCPU == 0 && r.AgentRSS == 0 {
					return "in the controller"
				}
				return fmt.Sprintf("%.1f s, %.0f MiB", r.AgentCPU, r.AgentRSS)
			}},
	}
}

func writeTable(w io.Writer, rs []result) error {
	pods := rs[0].Pods
	for _, r := range rs {
		if r.Pods != pods {
			return fmt.Errorf("results of %d and %d pods cannot share a table", pods, r.Pods)
		}
	}
	cols := columns(rs)
	most := 0
	for _, c := range cols {
		most = max(most, len(c.runs))
	}
	head := []string{fmt.Sprintf("%d pods, best of %d", pods, most)}
	for _, c := range cols {
		head = append(head, fmt.Sprintf("%s, `consolidateAfter: %s`", c.side, c.consolidateAfter))
	}
	fmt.Fprintf(w, "| %s |\n|---|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(cols)))
	for _, rw := range rows(pods) {
		cells := []string{rw.name}
		for _, c := range cols {
			cells = append(cells, best(c.runs, rw.key, rw.cell))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	return nil
}
