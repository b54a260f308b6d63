// Package cmdline is what quotad and quotactl share of their command lines,
// on kong: a flag falls back to the environment variable its envvar tag
// names, read through a getenv the caller passes (never the process's
// environment behind its back, so that tests decide what a command sees);
// help shows that variable and the flag's default; and --help and
// --version end parsing without ending the process.
package cmdline

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// New returns a parser of grammar (a kong command-line struct) that
// writes help and errors to stdout and stderr, with opts after its own.
func New(grammar any, getenv func(string) string, stdout, stderr io.Writer, opts ...kong.Option) (*kong.Kong, error) {
	return kong.New(grammar, append([]kong.Option{
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exit{code}) }),
		kong.ValueFormatter(HelpWithEnv),
		kong.Resolvers(EnvResolver(getenv)),
	}, opts...)...)
}

// exit carries kong's exit, after --help or --version, out of Parse.
type exit struct{ code int }

// Parse parses args (without the program's name) with a parser made by
// New. After --help or --version, which have printed what was asked, it
// returns no context and the exit status they chose.
func Parse(k *kong.Kong, args []string) (ctx *kong.Context, status int, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exit)
			if !ok {
				panic(r)
			}
			ctx, status, err = nil, e.code, nil
		}
	}()
	ctx, err = k.Parse(args)
	return ctx, 0, err
}

// EnvResolver supplies each flag not given on the command line from the
// environment variable its envvar tag names, read through getenv; an empty
// variable counts as unset. A bad value is an error naming the flag and
// the variable.
func EnvResolver(getenv func(string) string) kong.Resolver {
	return kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
		name := flag.Tag.Get("envvar")
		if name == "" {
			return nil, nil
		}
		v := getenv(name)
		if v == "" {
			return nil, nil
		}
		if flag.Enum != "" && !slices.Contains(flag.EnumSlice(), v) {
			return nil, fmt.Errorf("$%s=%q: want one of %s", name, v, strings.Join(flag.EnumSlice(), ", "))
		}
		// Parse it once here, into a scratch value, so that an error names
		// the variable it came from.
		scratch := reflect.New(flag.Target.Type()).Elem()
		if err := flag.Parse(kong.ScanFromTokens(kong.Token{Type: kong.FlagValueToken, Value: v}), scratch); err != nil {
			// kong's message starts with the flag, which Resolve adds too.
			msg := strings.TrimPrefix(err.Error(), "--"+flag.Name+": ")
			return nil, fmt.Errorf("$%s=%q: %s", name, v, msg)
		}
		return v, nil
	})
}

// HelpWithEnv is kong's help text of a flag with its environment variable
// and its default.
func HelpWithEnv(v *kong.Value) string {
	var notes []string
	if name := v.Tag.Get("envvar"); name != "" {
		notes = append(notes, "$"+name)
	}
	if v.HasDefault && v.Default != "" && !(v.Default == "0" && v.Target.Kind() == reflect.Int) {
		notes = append(notes, "default "+v.Default)
	}
	if len(notes) == 0 {
		return v.Help
	}
	return v.Help + " (" + strings.Join(notes, "; ") + ")"
}
