package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// takenPort listens on a free loopback port for the rest of the test and returns it.
func takenPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })
	return strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)
}

// Every value is checked before the emulator takes its port: a wrong queue is reported as
// such, not as "address already in use", when the port is taken (by an emulator already
// running there, say).
func TestEmulatorChecksEveryValueBeforeItListens(t *testing.T) {
	port := takenPort(t)
	cases := map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"INITIAL_QUEUES":    {nil, map[string]string{"PORT": port, "INITIAL_QUEUES": "projects/p/queues/q"}, `INITIAL_QUEUES "projects/p/queues/q"`},
		"-queue":            {[]string{"-port", port, "-queue", "projects/p/locations/l/queues/bad_id"}, nil, `-queue "projects/p/locations/l/queues/bad_id"`},
		"queue given twice": {[]string{"-port", port, "-queue", queue, "-queue", queue}, nil, "given twice"},
		"-oidc-key-file":    {[]string{"-port", port, "-oidc-key-file", "/nonexistent/oidc.key"}, nil, "-oidc-key-file"},
		"-create-quota":     {[]string{"-port", port, "-create-quota", "projects/p/queues/q=10"}, nil, "-create-quota"},
		"APP_ENGINE_EMULATOR_HOST": {[]string{"-port", port}, map[string]string{"APP_ENGINE_EMULATOR_HOST": "ftp://x"},
			"APP_ENGINE_EMULATOR_HOST"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a value wrongly accepted returns at once
			err := run(ctx, tc.args, func(k string) string { return tc.env[k] }, &out, &out)
			require.Error(t, err)
			assert.ErrorIs(t, err, errUsage, "a bad value is a usage error (exit status 2)")
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "address already in use")
		})
	}

	t.Run("a taken port with good values", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out bytes.Buffer
		err := run(ctx, []string{"-port", port, "-queue", queue}, func(string) string { return "" }, &out, &out)
		require.Error(t, err)
		assert.NotErrorIs(t, err, errUsage, "the values are good; the port is taken")
		assert.Contains(t, err.Error(), "-port")
		assert.Contains(t, err.Error(), "address already in use")
	})
}

// envHoldingDefaultPort marks the run of this package's tests that
// TestTheTestsPassWhileTheDefaultPortIsTaken starts.
const envHoldingDefaultPort = "CLOUDTASKS_EMULATOR_TEST_DEFAULT_PORT_TAKEN"

// A user runs the emulator on its default port while `go test ./...` runs: no test may need
// that port. This test takes 127.0.0.1:8123 (or finds it taken already) and runs every other
// test of the package again in a process of its own; one that listens on 8123 fails there.
func TestTheTestsPassWhileTheDefaultPortIsTaken(t *testing.T) {
	if os.Getenv(envHoldingDefaultPort) != "" {
		t.Skip("this is the run with the port taken")
	}
	if testing.Short() {
		t.Skip("runs the package's tests again")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:8123")
	switch {
	case err == nil:
		defer lis.Close()
	case errors.Is(err, syscall.EADDRINUSE):
		// Taken already, by an emulator the user runs: the condition under test.
	default:
		t.Skipf("cannot take 127.0.0.1:8123: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.count=1", "-test.skip", "^TestTheTestsPassWhileTheDefaultPortIsTaken$")
	cmd.Env = append(withoutEmulatorVariables(os.Environ()), envHoldingDefaultPort+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with 127.0.0.1:8123 taken, the package's tests fail (%v); a test must pick a free port (-port 0):\n%s", err, tail(out, 8<<10))
	}
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
