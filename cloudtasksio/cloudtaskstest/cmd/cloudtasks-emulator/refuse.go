// This file reads the -create-refuse and -create-refuse-burst values: refusals of CreateTask
// that do not follow the rate, unlike -create-quota's.

package main

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// refuseSeed seeds -create-refuse's draws: each start refuses the same calls in their order
// of arrival.
const refuseSeed = 1

// maxRefuseDelay bounds the DELAY of -create-refuse-burst: a day is longer than any load test.
const maxRefuseDelay = 24 * time.Hour

// refusalReactors returns the reactors of the -create-refuse and -create-refuse-burst
// values (empty: not given), the burst first, so that its calls are refused whatever the draw.
func refusalReactors(share, burst string) ([]cloudtaskstest.Reactor, error) {
	var rs []cloudtaskstest.Reactor
	if burst != "" {
		r, err := parseRefuseBurst(burst)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	if share != "" {
		r, err := parseRefuse(share)
		if err != nil {
			return nil, err
		}
		if r != nil {
			rs = append(rs, r)
		}
	}
	return rs, nil
}

// parseRefuse reads a -create-refuse value: a share of the creates from 0 to 1, as a
// fraction (0.02) or a percentage (2%). It returns nil for a share of zero.
func parseRefuse(v string) (cloudtaskstest.Reactor, error) {
	text, percent := strings.CutSuffix(strings.TrimSpace(v), "%")
	share, err := strconv.ParseFloat(text, 64)
	if percent {
		share /= 100
	}
	if err != nil || math.IsNaN(share) || share < 0 || share > 1 {
		return nil, usagef("-create-refuse %s: want the share of creates to refuse, from 0 to 1, such as 0.02 or 2%%", shown(v))
	}
	if share == 0 {
		return nil, nil
	}
	return cloudtaskstest.RefuseAtRandom(share, refuseSeed), nil
}

// parseRefuseBurst reads a -create-refuse-burst value, N[@DELAY]: the N creates that arrive
// from DELAY (default 0) after the first one are refused.
func parseRefuseBurst(v string) (cloudtaskstest.Reactor, error) {
	bad := func(why string) error {
		return usagef("-create-refuse-burst %s: %s; want N[@DELAY], such as 40 or 40@2s", shown(v), why)
	}
	nText, delayText, hasDelay := strings.Cut(strings.TrimSpace(v), "@")
	n, err := strconv.Atoi(nText)
	if err != nil || n < 1 {
		return nil, bad("N is not a whole number above zero")
	}
	var delay time.Duration
	if hasDelay {
		if delay, err = time.ParseDuration(delayText); err != nil || delay < 0 || delay > maxRefuseDelay {
			return nil, bad("DELAY is not a duration from 0 to 24h")
		}
	}
	return cloudtaskstest.RefuseBurst(n, delay), nil
}
