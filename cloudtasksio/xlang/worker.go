package xlang

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
)

// PrepareWorker makes the process ready to run as a Go SDK worker when it was started as one
// (Beam's --worker flag set to true): call it after flag.Parse and before beam.Init. In any
// other process it does nothing.
//
// Beam's Go harness reads the pipeline options the runner provides (the file named by
// PIPELINE_OPTIONS_FILE, else the --options flag) into runtime.RawOptionsWrapper and exits
// when that fails. Options written by Beam's Python SDK do not fit it: Python writes integers
// such as beam:option:parallelism:v1 as strings ("-1"), so a Go worker of a Python pipeline
// fails before it starts (and prints every option in the message). PrepareWorker rewrites
// the options first (readableOptions) and hands them to the harness through --options.
func PrepareWorker() error {
	if f := flag.Lookup("worker"); f == nil || f.Value.String() != "true" {
		return nil
	}
	opts := flag.Lookup("options")
	if opts == nil {
		return fmt.Errorf("worker mode: Beam's harness flag --options is not defined; import Beam's harness (core/runtime/harness/init)")
	}
	raw := []byte(opts.Value.String())
	if path := os.Getenv("PIPELINE_OPTIONS_FILE"); path != "" {
		var err error
		if raw, err = os.ReadFile(path); err != nil {
			return fmt.Errorf("worker mode: reading the pipeline options file: %w", err)
		}
	}
	if len(raw) == 0 {
		return nil
	}
	fixed, err := readableOptions(raw)
	if err != nil {
		return fmt.Errorf("worker mode: the pipeline options: %w", err)
	}
	if err := opts.Value.Set(string(fixed)); err != nil {
		return err
	}
	return os.Unsetenv("PIPELINE_OPTIONS_FILE")
}

// readableOptions rewrites pipeline options (JSON) so that they unmarshal into
// runtime.RawOptionsWrapper: an option the wrapper has a field for whose value does not fit
// the field's type is converted when it is a string of the right kind ("-1" for an integer,
// "true" for a boolean) and dropped otherwise. Every other option is kept as it is.
func readableOptions(raw []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	wt := reflect.TypeFor[runtime.RawOptionsWrapper]()
	for i := range wt.NumField() {
		f := wt.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		v, ok := m[key]
		if !ok || json.Unmarshal(v, reflect.New(f.Type).Interface()) == nil {
			continue
		}
		delete(m, key)
		var s string
		if json.Unmarshal(v, &s) != nil {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int64, reflect.Int32:
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				m[key] = json.RawMessage(strconv.FormatInt(n, 10))
			}
		case reflect.Bool:
			if b, err := strconv.ParseBool(s); err == nil {
				m[key] = json.RawMessage(strconv.FormatBool(b))
			}
		}
	}
	return json.Marshal(m)
}
