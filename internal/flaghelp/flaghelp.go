// Package flaghelp prints a flag set's flags as the gateway's main help does:
// with two dashes ("--from URL"), which the flag package accepts as well as
// one, so that every command's help spells flags the same way.
package flaghelp

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// PrintDefaults is flag.FlagSet.PrintDefaults with "--" before each name.
func PrintDefaults(fs *flag.FlagSet, out io.Writer) {
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		var b strings.Builder
		b.WriteString("  --" + f.Name)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(text, "\n", "\n    \t"))
		if !isZero(f) {
			if name == "string" || isStringFlag(f) {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(out, b.String())
	})
}

// isZero reports whether the flag's default is its type's zero value, which
// the flag package leaves out of the help.
func isZero(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

// isStringFlag reports whether f holds a string (its default is then quoted,
// as the flag package does).
func isStringFlag(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, s := g.Get().(string)
	return s
}
