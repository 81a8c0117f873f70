package cloudtasksio

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// The memory of a worker process whose QueueFn spreads elements over very many queues: what the
// process keeps per queue (the preflight's findings, the adaptive limit, ...) must stay bounded.
// The Cloud Tasks server runs in a process of its own (this test binary started again with
// manyQueuesServerEnv set), so the RSS measured is the sink's alone.

// manyQueuesServerEnv, when set to a number of queues, makes the test binary serve them from an
// in-memory server instead of running tests: it prints the address, and serves until its
// standard input closes.
const manyQueuesServerEnv = "CLOUDTASKSIO_MANY_QUEUES_SERVER"

func init() {
	register.Function1x2(queueOfSpreadOrder)
	if n := os.Getenv(manyQueuesServerEnv); n != "" {
		serveManyQueues(n)
	}
}

// spreadOrder is an element that names its queue.
type spreadOrder struct {
	Queue string `json:"-"`
	ID    int    `json:"id"`
}

func queueOfSpreadOrder(o spreadOrder) (Queue, error) { return NewQueue("p", "l", o.Queue) }

func manyQueueName(i int) string { return fmt.Sprintf("q%06d", i) }

func serveManyQueues(count string) {
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintln(os.Stderr, manyQueuesServerEnv, "is not a number:", count)
		os.Exit(2)
	}
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	for i := range n {
		if _, err := srv.CreateQueue("projects/p/locations/l/queues/" + manyQueueName(i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Println(srv.Addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// startManyQueuesServer starts the server process with n queues and returns its address.
func startManyQueuesServer(b *testing.B, n int) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), manyQueuesServerEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal("the server process did not start: ", err)
	}
	return strings.TrimSpace(line)
}

// rssMB returns the process's resident set size in MB, after a collection that returns freed
// memory to the system, and the heap in use in MB.
func rssMB() (rss, heap float64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	status, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rss = kb / 1024
			}
		}
	}
	return rss, float64(ms.HeapInuse) / (1 << 20)
}

// BenchmarkQueueFnStateOverManyQueues writes one task to each of 100,000 queues (bundles of
// 1,000 elements, one DoFn instance, the default writer options: queue preflight and adaptive
// concurrency on) and reports the worker's RSS and heap in use after 1,000 to 100,000 queues
// (rss-MB-at-<n>, heap-MB-at-<n>). Run it with -benchtime=1x; the process state is the
// package's, so run it alone (-run '^$').
func BenchmarkQueueFnStateOverManyQueues(b *testing.B) {
	const queues = 100_000
	addr := startManyQueuesServer(b, queues)
	cfg := Config{QueueFn: queueOfSpreadOrder, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		EmulatorEndpoint: addr}
	spec, err := compile(cfg, typeOf(spreadOrder{}))
	if err != nil {
		b.Fatal(err)
	}
	f := &writeFn{Spec: spec}
	if err := f.Setup(); err != nil {
		b.Fatal(err)
	}
	checkpoints := map[int]bool{1_000: true, 2_000: true, 5_000: true, 10_000: true, 20_000: true, 50_000: true, 100_000: true}
	for b.Loop() {
		start := time.Now()
		for bundle := 0; bundle < queues/1000; bundle++ {
			ctx, _ := metricsContext()
			if err := f.StartBundle(ctx, discardDeadLetters); err != nil {
				b.Fatal(err)
			}
			for i := bundle * 1000; i < (bundle+1)*1000; i++ {
				if err := f.ProcessElement(ctx, 0, spreadOrder{Queue: manyQueueName(i), ID: i}, discardDeadLetters); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.FinishBundle(ctx, discardDeadLetters); err != nil {
				b.Fatal(err)
			}
			if done := (bundle + 1) * 1000; checkpoints[done] {
				rss, heap := rssMB()
				b.ReportMetric(rss, fmt.Sprintf("rss-MB-at-%dk", done/1000))
				b.ReportMetric(heap, fmt.Sprintf("heap-MB-at-%dk", done/1000))
				b.Logf("%6d queues: RSS %.1f MB, heap in use %.1f MB, %v", done, rss, heap, time.Since(start).Round(time.Millisecond))
			}
		}
	}
}
