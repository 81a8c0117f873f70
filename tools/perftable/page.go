package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	beginMark = "<!-- perftable "
	endMark   = "<!-- end perftable -->"
)

// regeneratePage renders every generated table of a markdown page from its marker's
// arguments, writes the page when write is set and something changed, and returns the
// arguments of the tables that changed.
func regeneratePage(page string, write bool) ([]string, error) {
	raw, err := os.ReadFile(page)
	if err != nil {
		return nil, fmt.Errorf("perftable: page: %w", err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	var out strings.Builder
	var changed []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		text := strings.TrimSpace(line)
		if !strings.HasPrefix(text, beginMark) || !strings.HasSuffix(text, "-->") {
			continue
		}
		args := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(text, beginMark), "-->"))
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != endMark {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("perftable: %s:%d: %q has no %q after it", page, i+1, text, endMark)
		}
		table, err := render(args, filepath.Dir(page))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", page, i+1, err)
		}
		if old := strings.Join(lines[i+1:end], ""); old != table {
			changed = append(changed, strings.Join(args, " "))
		}
		out.WriteString(table)
		out.WriteString(lines[end])
		i = end
	}
	if write && len(changed) > 0 {
		if err := os.WriteFile(page, []byte(out.String()), 0o644); err != nil {
			return nil, fmt.Errorf("perftable: page: %w", err)
		}
	}
	return changed, nil
}
