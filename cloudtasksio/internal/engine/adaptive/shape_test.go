package adaptive

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of how the adaptive controller starts and shares a quota: the first round trip before
// any answer, the rate after the first rejection, and growth that brings processes that
// started together to equal shares.

func TestBeforeTheFirstAnswerSlowStartLetsInitialRateCreatesASecondThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No answer comes back (a slow first create: a cold connection, a token fetch). The
		// round trip is at least as long as the first create has waited, so slow start lets
		// initialRate creates a second through from the first, not initialLimit in all: at 200
		// ms, one create in the first round trip would cost a fifth of a second of a quota of
		// 1,000/s. It stops at the floor of a 250 ms round trip, 25 more creates: those that a
		// cold start holds all come back at once when it ends, and grow the limit.
		a := New()
		start := time.Now()
		var sent []time.Duration
		for {
			_, ok, until := a.Acquire(testQueue, 1000, 0, time.Now())
			if ok {
				sent = append(sent, time.Since(start))
				continue
			}
			if until.IsZero() {
				break
			}
			time.Sleep(time.Until(until))
		}
		// A quarter of a second's worth (maxUnanswered), then it waits for an answer.
		require.Len(t, sent, initialLimit+25)
		for i, at := range sent {
			var want time.Duration // the first atOnce go at once
			if i+1 > atOnce {
				want = time.Duration(float64(i+1-initialLimit)/initialRate*float64(time.Second)) + time.Microsecond
			}
			require.Equal(t, want, at, "create %d", i)
		}
	})
}

func TestRefusalsBeforeAnyAcceptanceLeaveSlowStartAtItsFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The queue refuses every create from its first (another process took the quota
		// first), at once, while the first creates are still in flight. With nothing
		// accepted there is no rate to pace at: the refusals of a queue's first creates say
		// nothing of the rate it takes from this process (half of what was in flight over the
		// wait would be a guess). So they do not end slow start, and
		// slow start, which grows only on successes, lets no more than its floor through:
		// initialRate over the round trip, here a tenth of a create, and one create may always
		// be in flight.
		a := New()
		const refusedIn = time.Millisecond
		ps := takeAsLetThrough(t, a, testQueue, 1000, 5)
		time.Sleep(refusedIn)
		a.Release(ps[4], Throttled, 0, time.Now())
		assert.Equal(t, refusedIn, a.Queue(testQueue).RTT, "the rejection's own round trip")
		for _, p := range ps[:4] {
			a.Release(p, Throttled, 0, time.Now())
		}
		for range 100 {
			p := takeAsLetThrough(t, a, testQueue, 1000, 1)[0]
			time.Sleep(time.Until(p.start) + refusedIn)
			a.Release(p, Throttled, 0, time.Now())
		}
		got := a.Queue(testQueue)
		assert.Zero(t, got.Decreases, "slow start goes on")
		assert.Zero(t, got.Rate)
		assert.Equal(t, 1.0, got.Limit, "the limit did not grow")
		take(t, a, testQueue, 1000, 1)
		assert.True(t, refused(a, testQueue, 1000), "one create in flight at a time")
	})
}

// pacedAlike makes testQueue of each Adaptive paced alike, as processes that started together
// are once the rejections that end slow start have come back and a paced create was accepted
// (pacedAfter), and returns the rate.
func pacedAlike(t *testing.T, rtt time.Duration, as ...*Adaptive) float64 {
	t.Helper()
	for _, a := range as {
		pacedAfter(t, a, 30, rtt)
	}
	rate := as[0].Queue(testQueue).Rate
	for _, a := range as[1:] {
		require.Equal(t, rate, a.Queue(testQueue).Rate)
	}
	return rate
}

// growForInFlight is how many creates growFor has in flight at most, as engines' MaxInFlight
// bounds them.
const growForInFlight = 1000

// growFor offers creates to testQueue of a faster than its rate for d, at most growForInFlight
// at a time, each succeeding a round trip after its start, and returns by how much the rate
// grew.
func growFor(t *testing.T, a *Adaptive, rtt, d time.Duration) float64 {
	t.Helper()
	var wg sync.WaitGroup
	defer wg.Wait()
	inFlight := make(chan struct{}, growForInFlight)
	before := a.Queue(testQueue).Rate
	start := time.Now()
	for time.Since(start) < d {
		inFlight <- struct{}{}
		p := acquireWhenAllowed(t, a)
		time.Sleep(time.Until(p.start))
		wg.Go(func() {
			time.Sleep(rtt)
			a.Release(p, Succeeded, 0, time.Now())
			<-inFlight
		})
	}
	return a.Queue(testQueue).Rate - before
}

func TestProcessesThatStartedTogetherGrowTowardsEqualRates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Two processes paced alike after their first rejection; one then meets four more
		// rounds of rejections, the other only the last of them. Growing by a share of its
		// own rate, the lower one would keep its lower share for good, and with equal work
		// per process it would finish last while the quota the others left stood unused.
		// Both grow by the same creates per second instead, so the lower one gains on the
		// higher.
		const rtt = 50 * time.Millisecond
		high, low := New(), New()
		pacedAlike(t, rtt, high, low)
		for round := range 4 {
			lows := acquireWhenAllowed(t, low)
			var highs Permit
			if round == 3 {
				highs = acquireWhenAllowed(t, high)
			}
			time.Sleep(rtt)
			low.Release(lows, Throttled, 0, time.Now())
			if round == 3 {
				high.Release(highs, Throttled, 0, time.Now())
			}
		}
		highRate, lowRate := high.Queue(testQueue).Rate, low.Queue(testQueue).Rate
		require.Less(t, lowRate, 0.8*highRate)

		var wg sync.WaitGroup
		var highGrew, lowGrew float64
		wg.Go(func() { highGrew = growFor(t, high, rtt, time.Second) })
		wg.Go(func() { lowGrew = growFor(t, low, rtt, time.Second) })
		wg.Wait()
		t.Logf("rates %.1f and %.1f grew by %.1f and %.1f creates/s", highRate, lowRate, highGrew, lowGrew)
		assert.InEpsilon(t, highGrew, lowGrew, 0.05, "the same creates per second")
		assert.Greater(t, (lowRate+lowGrew)/(highRate+highGrew), lowRate/highRate, "the lower rate gained on the higher")
	})
}

func TestLaterDecreasesReadTheAcceptedRateFromTheFirstRejectionOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Until the first rejection the queue's bucket was emptying: it accepted more than the
		// quota. A decrease a round trip later that read the accepted rate over the last two
		// round trips would count those acceptances and leave the rate far above the quota
		// for more round trips; it counts only what the queue accepted since the first
		// rejection.
		const rtt = 100 * time.Millisecond
		a := New()
		for limitOf(a) < 200 {
			ps := take(t, a, testQueue, 1000, limitOf(a))
			time.Sleep(rtt)
			succeedAll(a, ps)
		}
		// A last round of slow start: its first quotaRun answers are rejections, which end
		// slow start, and over the next round trip one create in four of the rest is accepted.
		last := take(t, a, testQueue, 1000, limitOf(a))
		time.Sleep(rtt)
		for _, p := range last[:quotaRun] {
			a.Release(p, Throttled, 0, time.Now())
		}
		require.Equal(t, 1, a.Queue(testQueue).Decreases)
		first := a.Queue(testQueue).Rate
		require.Greater(t, first, 1000.0, "the rate of a bucket emptying")
		// Two creates paced after it (the second held back by the rate); the second is
		// rejected when the round trip is over.
		paced := []Permit{acquireWhenAllowed(t, a), acquireWhenAllowed(t, a)}
		require.True(t, paced[1].binding)
		accepted := 0
		for i, p := range last[quotaRun:] {
			time.Sleep(rtt / time.Duration(len(last)))
			o := Other // neither accepted nor a rejection
			if i%4 == 0 {
				o = Succeeded
				accepted++
			}
			a.Release(p, o, 0, time.Now())
		}
		a.Release(paced[0], Succeeded, 0, time.Now())
		a.Release(paced[1], Throttled, 0, time.Now())
		got := a.Queue(testQueue)
		require.Equal(t, 2, got.Decreases)
		// The queue accepted about accepted creates (plus the one paced success) over the
		// round trip since the first rejection: the rate is set a little below that.
		since := float64(accepted+1) / rtt.Seconds()
		t.Logf("first rate %.0f/s, accepted since %.0f/s, rate now %.0f/s", first, since, got.Rate)
		assert.InEpsilon(t, since*setPoint, got.Rate, 0.05)
	})
}

func TestADecreaseAfterALongQuietSpellGrowsFromTheRateItFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A process whose peers stopped grew into the quota they left. Its next rejection
		// finds the quota it has now: growth after it is a share of that rate, as after the
		// first rejection, not of the much smaller rate it was paced at then.
		const rtt = 20 * time.Millisecond
		a := New()
		throttleAfter(t, a, 30, rtt)
		unit := a.Queue(testQueue).Rate
		firstSecond := growFor(t, a, rtt, time.Second) / unit
		// Past growthDoublings*growthDoubling without a decrease, and not so long that the rate
		// reaches what growFor's engines can send (then no create waits for its slot and the
		// rate cannot grow after the decrease either).
		growFor(t, a, rtt, 2*time.Second)
		require.Greater(t, a.Queue(testQueue).Rate, 3*unit, "grown into a free quota")

		p := acquireWhenAllowed(t, a)
		time.Sleep(rtt)
		a.Release(p, Throttled, 0, time.Now())
		found := a.Queue(testQueue).Rate
		again := growFor(t, a, rtt, time.Second) / found
		t.Logf("grew %.1f%% of %.0f/s in the first second after the first decrease, %.1f%% of %.0f/s after the later one", 100*firstSecond, unit, 100*again, found)
		assert.InEpsilon(t, firstSecond, again, 0.25)
	})
}

func TestAColdStartStoresAtMostAQuarterSecondsFloorInTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every create waits a second before it reaches the queue (a cold connection, a token
		// fetch), then all are answered at once. The creates slow start let through meanwhile
		// succeed and grow the limit: at most maxUnanswered's worth of them, so that once the
		// round trip is short again the limit is not a burst many times the quota.
		a := New()
		var cold []Permit
		for {
			p, ok, until := a.Acquire(testQueue, 1000, 0, time.Now())
			if ok {
				cold = append(cold, p)
				continue
			}
			if until.IsZero() {
				break
			}
			time.Sleep(time.Until(until))
		}
		time.Sleep(time.Second)
		succeedAll(a, cold)
		for range 60 { // then one create at a time, answered in 30 ms
			p := take(t, a, testQueue, 1000, 1)[0]
			time.Sleep(30 * time.Millisecond)
			a.Release(p, Succeeded, 0, time.Now())
		}
		got := a.Queue(testQueue)
		t.Logf("%d creates went before the first answer; limit now %.1f at %v", len(cold), got.Limit, got.RTT)
		assert.LessOrEqual(t, got.Limit, float64(initialLimit)+2*initialRate*maxUnanswered.Seconds()+initialRate*got.RTT.Seconds())
		assert.Less(t, got.Limit, 60.0, "not about a hundred in flight at 30 ms")
	})
}

func TestAQueueWhoseCreatesWentUnansweredStartsItsWaitAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A bundle's first create was cancelled (the bundle failed) and the queue is used again
		// five minutes later: slow start lets atOnce go at once, not the floor of a wait
		// that began five minutes ago.
		a := New()
		p := take(t, a, testQueue, 1000, 1)[0]
		time.Sleep(time.Millisecond)
		a.Release(p, Other, 0, time.Now())
		time.Sleep(5 * time.Minute)
		take(t, a, testQueue, 1000, atOnce)
		assert.True(t, refused(a, testQueue, 1000), "only atOnce at once")
	})
}

func TestASmallShareOfAQuotaStillSteersTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Long after its first rejection, a process whose rate holds its creates back gets
		// about 12 of them a second accepted, fewer than acceptedMinCount in the last second.
		// The decrease reads that rate over the second anyway: only a span that the first
		// rejection cut short is too short to read.
		const rtt = 50 * time.Millisecond
		a := New()
		throttleAfter(t, a, 30, rtt)
		rate := a.Queue(testQueue).Rate
		var wg sync.WaitGroup
		start := time.Now()
		accepted := 0
		for i := 0; time.Since(start) < 2*time.Second; i++ {
			p := acquireWhenAllowed(t, a)
			time.Sleep(time.Until(p.start))
			o := Other
			switch {
			case time.Since(start) >= 2*time.Second-5*time.Millisecond:
				o = Throttled // the last one
			case i%50 == 0:
				o = Succeeded
				if time.Since(start) >= time.Second-rtt {
					accepted++
				}
			}
			wg.Go(func() {
				time.Sleep(rtt)
				a.Release(p, o, 0, time.Now())
			})
		}
		wg.Wait()
		require.Less(t, accepted, acceptedMinCount)
		got := a.Queue(testQueue)
		t.Logf("rate %.0f/s, then %.1f/s after %d acceptances in the last second", rate, got.Rate, accepted)
		assert.Less(t, got.Rate, 0.2*rate, "down to what the queue accepts, not by a tenth")
	})
}

func TestAProcessThatPacedAQueueAloneGrowsByAtMostTwiceItsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A process paced a queue alone and read its rate at the quota; then others joined and
		// its decreases brought it to a quarter of that. Growing by a share of its first rate,
		// it would keep a larger share than the newcomers for good; it grows by at most a share
		// of twice its rate now: about twice what a process paced at that rate from the start
		// grows by, not four times.
		const rtt = 50 * time.Millisecond
		a, fresh := New(), New()
		// Paced after an acceptance, so that the refusals below are not a burst.
		pacedAfter(t, a, 30, rtt)
		alone, unit := a.Queue(testQueue).Rate, a.Queue(testQueue).Unit
		pacedAfter(t, fresh, 30, rtt)
		// Rejections until a is at a quarter of its first rate; the last one reaches fresh
		// too, so that both grow from a decrease at the same time.
		for last := false; !last; {
			last = a.Queue(testQueue).Rate*decreaseFactor <= alone/4
			p := acquireWhenAllowed(t, a)
			var q Permit
			if last {
				q = acquireWhenAllowed(t, fresh)
			}
			time.Sleep(rtt)
			a.Release(p, Throttled, 0, time.Now())
			if last {
				fresh.Release(q, Throttled, 0, time.Now())
			}
		}
		now, freshRate := a.Queue(testQueue).Rate, fresh.Queue(testQueue).Rate
		assert.Equal(t, unit, a.Queue(testQueue).Unit, "decreases leave the unit; growth bounds it")
		var wg sync.WaitGroup
		var grew, freshGrew float64
		wg.Go(func() { grew = growFor(t, a, rtt, time.Second) })
		wg.Go(func() { freshGrew = growFor(t, fresh, rtt, time.Second) })
		wg.Wait()
		ratio := (grew / now) / (freshGrew / freshRate)
		t.Logf("alone %.0f/s, now %.0f/s, grew %.1f/s; fresh at %.0f/s grew %.1f/s; %.2f times its share", alone, now, grew, freshRate, freshGrew, ratio)
		assert.Less(t, ratio, 2.5)
		assert.Greater(t, ratio, 1.5, "a process below half its unit still grows faster than by its rate's share")
	})
}

func TestAFewAcceptancesAfterTheFirstRejectionDoNotSteerTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Of the twenty creates in flight, the queue accepts the first answer, then refuses the
		// next quotaRun (another process took the quota), which ends slow start, and accepts
		// one more after that. One acceptance since slow start's end says little of the rate
		// the queue takes from this process: the next decrease lowers the rate by
		// decreaseFactor, not to one acceptance's worth.
		const rtt = 50 * time.Millisecond
		a := New()
		ps := takeAsLetThrough(t, a, testQueue, 1000, 20)
		time.Sleep(rtt)
		a.Release(ps[0], Succeeded, 0, time.Now())
		for _, p := range ps[1 : 1+quotaRun] {
			a.Release(p, Throttled, 0, time.Now())
		}
		require.Equal(t, 1, a.Queue(testQueue).Decreases)
		time.Sleep(20 * time.Millisecond) // an acceptance after the rejections
		a.Release(ps[1+quotaRun], Succeeded, 0, time.Now())
		for _, p := range ps[2+quotaRun:] {
			a.Release(p, Other, 0, time.Now())
		}
		rate := a.Queue(testQueue).Rate
		paced := []Permit{acquireWhenAllowed(t, a), acquireWhenAllowed(t, a)}
		require.True(t, paced[1].binding)
		time.Sleep(rtt)
		a.Release(paced[0], Other, 0, time.Now())
		a.Release(paced[1], Throttled, 0, time.Now())
		got := a.Queue(testQueue)
		t.Logf("rate %.2f/s, then %.2f/s; round trip %v", rate, got.Rate, got.RTT)
		require.Equal(t, 2, got.Decreases)
		assert.InDelta(t, rate*decreaseFactor, got.Rate, 1e-6*rate)
	})
}

// offerPaced acquires n permits to testQueue of a, waiting for each one's paced start.
func offerPaced(t *testing.T, a *Adaptive, n int) []Permit {
	t.Helper()
	ps := make([]Permit, n)
	for i := range ps {
		ps[i] = acquireWhenAllowed(t, a)
		time.Sleep(time.Until(ps[i].start))
	}
	return ps
}

// stormRound paces testQueue of a at round trip rtt (pacedAfter), then answers a round trip's
// 20 creates: the first answer, a rejection, makes the second decrease (a tenth: nothing yet
// says by how much the rate is over), then accepted of the other 19 (at most 8, spread among
// the first 16) succeed and the rest are rejections. It returns the rate that decrease set and
// when it came.
func stormRound(t *testing.T, a *Adaptive, rtt time.Duration, accepted int) (float64, time.Time) {
	t.Helper()
	require.True(t, accepted > 0 && accepted <= 8 && 16%accepted == 0, "accepted %d", accepted)
	pacedAfter(t, a, 30, rtt)
	ps := offerPaced(t, a, 20)
	time.Sleep(rtt)
	a.Release(ps[0], Throttled, 0, time.Now())
	second := time.Now()
	require.Equal(t, 2, a.Queue(testQueue).Decreases)
	rate := a.Queue(testQueue).Rate
	for i, p := range ps[1:] {
		o := Throttled
		if i%(16/accepted) == 0 && i < 16 {
			o = Succeeded
		}
		a.Release(p, o, 0, time.Now())
	}
	return rate, second
}

// rejectNextRound offers testQueue of a one paced create and answers it, a round trip rtt
// later, with a rejection; it returns the rate that leaves.
func rejectNextRound(t *testing.T, a *Adaptive, rtt time.Duration) float64 {
	t.Helper()
	p := offerPaced(t, a, 1)[0]
	time.Sleep(rtt)
	a.Release(p, Throttled, 0, time.Now())
	return a.Queue(testQueue).Rate
}

// answerRound offers testQueue of a a round trip's twenty paced creates and answers the i-th,
// a round trip rtt later, with outcome(i).
func answerRound(t *testing.T, a *Adaptive, rtt time.Duration, outcome func(i int) Outcome) {
	t.Helper()
	ps := offerPaced(t, a, 20)
	time.Sleep(rtt)
	for i, p := range ps {
		a.Release(p, outcome(i), 0, time.Now())
	}
}

func TestARoundOfMostlyRejectionsLowersTheRateToWhatTheQueueAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Just after the first rejection, eight processes that started at once each pace at
		// what the queue accepted while its bucket emptied, several times their share. The
		// answers of the next round trip are mostly rejections, and too few acceptances to
		// read the accepted rate by (acceptedMinCount). The decrease they lead to sets the
		// rate to what the queue accepted (a little below it), lowering it by at most half,
		// instead of by a tenth: at a tenth per round trip the storm lasts many round trips.
		const rtt = 100 * time.Millisecond
		a := New()
		before, second := stormRound(t, a, rtt, 8)
		// The next round trip's first rejection.
		after := rejectNextRound(t, a, rtt)
		accepted := 8 / time.Since(second).Seconds()
		t.Logf("rate %.1f/s before the decrease, %.1f/s after; %.1f/s accepted since the last decrease", before, after, accepted)
		assert.Less(t, after, 0.8*before, "lowered by more than a tenth")
		assert.InDelta(t, max(setPoint*accepted, stormFloor*before), after, 0.05*before)
	})
}

func TestRejectionsBeforeALongSpellDoNotHalveTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Mostly rejections came back after the last decrease, then the process sent nothing
		// for ten seconds (no work, or a RetryInfo pause). A rejection after that spell is
		// not the storm the rejections before it were: read over the spell, what the queue
		// accepted would be nearly nothing. The rate comes down by a tenth.
		const rtt = 100 * time.Millisecond
		a := New()
		before, _ := stormRound(t, a, rtt, 4)
		time.Sleep(10 * time.Second)
		after := rejectNextRound(t, a, rtt)
		t.Logf("rate %.1f/s before the decrease, %.1f/s after", before, after)
		assert.InDelta(t, decreaseFactor*before, after, 0.01*before)
	})
}

func TestARoundOfNearlyOnlyRejectionsLowersTheRateFurthest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The queue refused nearly every create of the round trip after the last decrease:
		// two acceptances among nineteen answers. The process sends several times what the
		// queue takes from it, more so than one that had eight accepted, so it comes down at
		// least as far: to half of its rate, not by a tenth. (Counting acceptances before
		// calling a round a storm let the process the queue refused most come down least; in
		// the start-up simulation those processes kept their rates while their peers halved.)
		const rtt = 100 * time.Millisecond
		a := New()
		before, _ := stormRound(t, a, rtt, 2)
		after := rejectNextRound(t, a, rtt)
		t.Logf("rate %.1f/s before the decrease, %.1f/s after", before, after)
		assert.InDelta(t, stormFloor*before, after, 0.01*before)
	})
}

func TestAQueueThatRefusesEverythingForAWhileHalvesTheRateOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The queue refuses every create for four round trips (its quota spent for the
		// minute, an outage). The first rejection takes a tenth off; the round after it,
		// nothing but rejections, halves the rate; the rounds after that, still nothing but
		// rejections, take a tenth each, not half each: halving every round trip would leave
		// a few creates a second, far below the share the process comes back to (a review's
		// trace at 200 ms with two seconds of refusal: 3.1/s instead of 7.8/s at its end,
		// and 6.1 s instead of 4.3 s back to nine tenths of the rate before). The queue first
		// accepts a paced create (pacedAfter): until then, refusals within spellGap of slow
		// start's end are held as the tail of the run that ended it (spell.go).
		const rtt = 100 * time.Millisecond
		a := New()
		pacedAfter(t, a, 30, rtt)
		before := a.Queue(testQueue).Rate
		for range 4 {
			answerRound(t, a, rtt, func(int) Outcome { return Throttled })
		}
		after := a.Queue(testQueue).Rate
		want := before * decreaseFactor * stormFloor * decreaseFactor * decreaseFactor
		t.Logf("rate %.1f/s before, %.1f/s after four round trips of refusals (%.1f/s halving each)", before, after, before*decreaseFactor*stormFloor*stormFloor*stormFloor)
		assert.InDelta(t, want, after, 0.01*before)

		// The queue accepts again, most creates of a round trip's twenty: the decrease of
		// the next rejection is not a storm's, and it ends the spell.
		answerRound(t, a, rtt, func(i int) Outcome {
			if i%4 == 1 {
				return Throttled
			}
			return Succeeded
		})
		rejectNextRound(t, a, rtt)
		a.mu.Lock()
		defer a.mu.Unlock()
		assert.False(t, a.queues[testQueue].stormSpell, "a round of mostly acceptances ends the spell")
	})
}

// assertFewerAcceptancesNeverLowerTheRateLess paces testQueue at a round trip of 100 ms
// (pacedAfter), answers refused round trips of twenty creates with nothing but
// rejections, then one round trip with none, one, two or four acceptances of twenty, and
// asserts that the decrease of the next rejection lowers the rate at least as far after none
// as after any of the others: the queue refused more of the first ones.
func assertFewerAcceptancesNeverLowerTheRateLess(t *testing.T, refused int) {
	t.Helper()
	after := map[int]float64{}
	for _, accepted := range []int{0, 1, 2, 4} {
		synctest.Test(t, func(t *testing.T) {
			const rtt = 100 * time.Millisecond
			a := New()
			pacedAfter(t, a, 30, rtt)
			round := func(acc int) {
				answerRound(t, a, rtt, func(i int) Outcome {
					if i > 0 && i <= acc {
						return Succeeded
					}
					return Throttled
				})
			}
			for range refused {
				round(0)
			}
			round(accepted)
			before := a.Queue(testQueue).Rate
			after[accepted] = rejectNextRound(t, a, rtt) / before
			t.Logf("%d accepted of 20: %.1f/s, then x%.3f", accepted, before, after[accepted])
		})
	}
	for _, acc := range []int{1, 2, 4} {
		assert.GreaterOrEqual(t, after[acc], after[0]-1e-9, "%d acceptances against none", acc)
	}
}

func TestInASpellOfRefusalsFewerAcceptancesNeverLowerTheRateLess(t *testing.T) {
	// After two round trips of nothing but rejections (the second halved the rate), a round
	// trip with none, one, two or four acceptances of twenty. The rate must not come down
	// less for the fewer (it did: none took a tenth, one halved).
	assertFewerAcceptancesNeverLowerTheRateLess(t, 2)
}

func TestAfterALongSpellOfRefusalsAFewAcceptancesDoNotSetTheRate(t *testing.T) {
	// The queue refuses everything for about a second (an outage, a quota spent), then
	// accepts none, one, two or four of a round trip's twenty creates. A rate read from those
	// few acceptances over the last second would be a few creates a second, far below the
	// share the process comes back to, and lower than a round with none leaves (no rate to
	// read): a handful of acceptances among mostly rejections says the queue still refuses
	// nearly everything, not what it takes. (While the refusals ended within a second of the
	// first rejection, the span that rejection cut short read as too short, and hid this from
	// TestInASpellOfRefusalsFewerAcceptancesNeverLowerTheRateLess.)
	assertFewerAcceptancesNeverLowerTheRateLess(t, 4)
}

func TestTheFirstRejectionReadsTheAcceptedRateOverAQuarterSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// At a 30 ms round trip the queue accepted 500 creates a second for 180 ms, then,
		// as slow start doubled into its bucket, 2,000 a second for 60 ms until the bucket
		// was empty. Read over two round trips, most of it the bucket's tokens, that set a
		// rate of 1,279/s; the first rejection reads 240 ms (firstReadSpan): 875/s.
		const rtt = 30 * time.Millisecond
		a := New()
		p, ok, _ := a.Acquire(testQueue, 1000, 0, time.Now())
		require.True(t, ok)
		start := time.Now()
		a.mu.Lock()
		q := a.queues[testQueue]
		q.rtt = rtt
		for d := time.Duration(0); d < 180*time.Millisecond; d += 2 * time.Millisecond {
			q.accepted.add(start.Add(d))
		}
		for d := 180 * time.Millisecond; d < 240*time.Millisecond; d += 500 * time.Microsecond {
			q.accepted.add(start.Add(d))
		}
		a.mu.Unlock()
		time.Sleep(240 * time.Millisecond)
		endSlowStart(t, a, p)
		got := a.Queue(testQueue).Rate
		t.Logf("rate %.1f/s after the first rejection", got)
		assert.InDelta(t, setPoint*875, got, 0.1*setPoint*875)
	})
}

func TestTheFirstRejectionAfterAnIdleSpellReadsOnlyTheBusySpell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One create, then a second with nothing to send, then a burst: the queue accepts
		// 2,000 creates a second for 60 ms until the first rejection. Read over 240 ms
		// (firstReadSpan) the idle second would count: 500/s. The reading starts with the
		// burst instead. (A review measured a burst of a process whose traffic had paused
		// for a second, 30 ms round trips: a first rate of 427/s against 1,858/s, and 19%
		// fewer creates in the six seconds after.)
		const rtt = 30 * time.Millisecond
		a := New()
		p, ok, _ := a.Acquire(testQueue, 1000, 0, time.Now())
		require.True(t, ok)
		time.Sleep(rtt)
		a.Release(p, Succeeded, 0, time.Now())
		time.Sleep(time.Second)
		p, ok, _ = a.Acquire(testQueue, 1000, 0, time.Now())
		require.True(t, ok)
		burst := time.Now()
		a.mu.Lock()
		q := a.queues[testQueue]
		for d := time.Duration(0); d < 60*time.Millisecond; d += 500 * time.Microsecond {
			q.accepted.add(burst.Add(d))
		}
		a.mu.Unlock()
		time.Sleep(60 * time.Millisecond)
		endSlowStart(t, a, p)
		got := a.Queue(testQueue).Rate
		t.Logf("rate %.1f/s after the first rejection", got)
		assert.InDelta(t, setPoint*2000, got, 0.15*setPoint*2000)
	})
}
