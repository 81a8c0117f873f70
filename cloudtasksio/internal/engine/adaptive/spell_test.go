package adaptive

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of the rules for refusals that are not a quota's (spell.go): noise in slow
// start, a burst that costs one decrease and is undone, and a paced rate that collapsed.

// pacedAfter is throttleAfter, then one paced create that the queue accepts a round trip rtt
// later. Until a create sent after slow start's end is accepted, the refusals that follow
// within spellGap belong to the run that ended it and do not lower the rate
// (spell.go); from the acceptance on, every refusal of a create sent after the last
// decrease does, as for any paced queue. The create starts at once, so it does not grow the
// rate. It returns the time of the rejections that ended slow start.
func pacedAfter(t *testing.T, a *Adaptive, limit float64, rtt time.Duration) time.Time {
	t.Helper()
	decreased := throttleAfter(t, a, limit, rtt)
	rate := a.Queue(testQueue).Rate
	p := acquireWhenAllowed(t, a)
	require.False(t, p.binding, "the first paced create starts at once")
	time.Sleep(rtt)
	a.Release(p, Succeeded, 0, time.Now())
	require.Equal(t, rate, a.Queue(testQueue).Rate)
	return decreased
}

// endSlowStart answers p, a create of slow start to testQueue, RESOURCE_EXHAUSTED, then
// acquires quotaRun-1 more creates and answers each RESOURCE_EXHAUSTED at the same instant: the
// run of refusals that ends slow start, as if p's answer alone had.
func endSlowStart(t *testing.T, a *Adaptive, p Permit) {
	t.Helper()
	a.Release(p, Throttled, 0, time.Now())
	for range quotaRun - 1 {
		a.Release(take(t, a, testQueue, 1000, 1)[0], Throttled, 0, time.Now())
	}
	require.Equal(t, 1, a.Queue(testQueue).Decreases, "a run of %d refusals ends slow start", quotaRun)
}

// storedLimit is the limit slow start grew for testQueue of a, without its floor.
func storedLimit(a *Adaptive) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queues[testQueue].limit
}

// slowStartRounds runs rounds of slow start on testQueue of a, each sending what the limit
// lets through (at most cap) and answering it a round trip rtt later, the i-th answer of the
// run with outcome(i), until the limit reaches cap, a decrease comes, or 30 rounds have gone.
// It returns the number of answers.
func slowStartRounds(t *testing.T, a *Adaptive, cap int, rtt time.Duration, outcome func(i int) Outcome) int {
	t.Helper()
	n, decreases := 0, a.Queue(testQueue).Decreases
	for range 30 {
		if l := a.Queue(testQueue); l.Decreases > decreases || l.Cap == cap && l.Limit >= float64(cap) {
			break
		}
		ps := take(t, a, testQueue, cap, limitOf(a))
		time.Sleep(rtt)
		for _, p := range ps {
			a.Release(p, outcome(n), 0, time.Now())
			n++
		}
	}
	return n
}

func TestASteadyShareOfRefusalsLetsSlowStartReachTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One create in ten is refused, whatever the rate (a front end shedding load, another
		// job on the project's quota). That is no quota slow start ran into: such a quota
		// refuses a growing share of a limit that doubles every round trip. Ending slow start
		// at the first of them would pace the queue far below what it takes.
		const cap = 1000
		a := New()
		n := slowStartRounds(t, a, cap, 100*time.Millisecond, func(i int) Outcome {
			if i%10 == 5 {
				return Throttled
			}
			return Succeeded
		})
		got := a.Queue(testQueue)
		t.Logf("%d answers, a tenth of them refusals; %+v", n, got)
		assert.Zero(t, got.Decreases)
		assert.Zero(t, got.Rate)
		assert.Equal(t, float64(cap), got.Limit, "slow start reached the cap")
	})
}

func TestARunOfRefusalsEndsSlowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A quota slow start runs into refuses a large share of its creates within a round
		// trip. quotaRun refusals in a row are clearly more than startNoise of the answers;
		// one fewer could still be noise.
		const rtt = 100 * time.Millisecond
		a := New()
		for limitOf(a) < 30 {
			ps := take(t, a, testQueue, 1000, limitOf(a))
			time.Sleep(rtt)
			succeedAll(a, ps)
		}
		ps := take(t, a, testQueue, 1000, quotaRun)
		time.Sleep(rtt)
		for _, p := range ps[:quotaRun-1] {
			a.Release(p, Throttled, 0, time.Now())
		}
		assert.Zero(t, a.Queue(testQueue).Decreases, "%d refusals in a row could be noise", quotaRun-1)
		a.Release(ps[quotaRun-1], Throttled, 0, time.Now())
		got := a.Queue(testQueue)
		assert.Equal(t, 1, got.Decreases, "%d end slow start", quotaRun)
		assert.Positive(t, got.Rate)

		// A share well above startNoise ends it too, acceptances among the refusals.
		b := New()
		n := slowStartRounds(t, b, 1000, rtt, func(i int) Outcome {
			if i >= 30 && i%2 == 0 {
				return Throttled
			}
			return Succeeded
		})
		got = b.Queue(testQueue)
		t.Logf("half of the answers from the 30th refusals: slow start ended at answer %d", n)
		assert.Equal(t, 1, got.Decreases)
		assert.Positive(t, got.Rate)
	})
}

func TestRefusalsBeforeAnyAcceptanceDoNotEndSlowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Before the queue accepted anything from this process, its refusals say nothing of
		// a rate to pace at (another process took the quota first): slow start sends its
		// floor and goes on. They do not count later either: once a create is accepted, slow
		// start ends only at a run of refusals after it.
		const rtt = 50 * time.Millisecond
		a := New()
		for range 50 {
			p := takeAsLetThrough(t, a, testQueue, 1000, 1)[0]
			time.Sleep(time.Until(p.start) + rtt)
			a.Release(p, Throttled, 0, time.Now())
		}
		assert.Zero(t, a.Queue(testQueue).Decreases, "fifty refusals, nothing accepted")
		assert.Zero(t, a.Queue(testQueue).Rate)

		p := takeAsLetThrough(t, a, testQueue, 1000, 1)[0]
		time.Sleep(time.Until(p.start) + rtt)
		a.Release(p, Succeeded, 0, time.Now())
		ps := takeAsLetThrough(t, a, testQueue, 1000, quotaRun)
		time.Sleep(rtt)
		for _, p := range ps[:quotaRun-1] {
			a.Release(p, Throttled, 0, time.Now())
		}
		assert.Zero(t, a.Queue(testQueue).Decreases, "the refusals before the acceptance did not count")
		a.Release(ps[quotaRun-1], Throttled, 0, time.Now())
		assert.Equal(t, 1, a.Queue(testQueue).Decreases, "a run after it ends slow start")
	})
}

func TestSlowStartJudgesRefusalsOneWindowAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A fifth of the creates refused, steadily, at a cap of 32: each window of
		// startWindow answers holds a share a little above startNoise, not clearly more. A
		// window is forgotten once it holds that many answers, so slow start does not end on
		// many windows of such a share added up (thousands of answers would tell a share
		// this far above startNoise apart from it).
		const cap = 32
		a := New()
		i := 0
		for range 150 {
			ps := take(t, a, testQueue, cap, limitOf(a))
			time.Sleep(100 * time.Millisecond)
			for _, p := range ps {
				o := Succeeded
				if i%5 == 2 {
					o = Throttled
				}
				a.Release(p, o, 0, time.Now())
				i++
			}
		}
		got := a.Queue(testQueue)
		t.Logf("%d answers, a fifth of them refusals; %+v", i, got)
		assert.Greater(t, i, 4000)
		assert.Zero(t, got.Decreases)
		assert.Equal(t, float64(cap), got.Limit)
	})
}

func TestSlowStartsLimitDoesNotGrowWhileItsRefusalsAreSuspect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Five refusals in a row, then five acceptances: somewhat more refusals than
		// startNoise explains, not yet clearly more. A quota needs a few more answers to tell,
		// and meanwhile a limit that doubles every round trip would run past it: the limit
		// does not grow until the window is no longer suspect (the sixth acceptance).
		const rtt = 100 * time.Millisecond
		a := New()
		for limitOf(a) < 30 {
			ps := take(t, a, testQueue, 1000, limitOf(a))
			time.Sleep(rtt)
			succeedAll(a, ps)
		}
		ps := take(t, a, testQueue, 1000, limitOf(a))
		var binding, other []Permit
		for _, p := range ps {
			if p.binding {
				binding = append(binding, p)
			} else {
				other = append(other, p)
			}
		}
		require.GreaterOrEqual(t, len(binding), 6)
		require.GreaterOrEqual(t, len(other), 5)
		time.Sleep(rtt)
		for _, p := range other[:5] {
			a.Release(p, Throttled, 0, time.Now())
		}
		limit := storedLimit(a)
		succeedAll(a, binding[:5])
		assert.Equal(t, limit, storedLimit(a), "five acceptances after five refusals: suspect")
		succeedAll(a, binding[5:6])
		assert.Equal(t, limit+slowStartGrowth, storedLimit(a), "the sixth: no longer suspect")
		assert.Zero(t, a.Queue(testQueue).Decreases)
	})
}

// answerPaced offers n creates to testQueue of a, each at its paced start, and answers the
// i-th a round trip rtt after its start with outcome(i), in the order they started; it returns
// when all are answered.
func answerPaced(t *testing.T, a *Adaptive, rtt time.Duration, n int, outcome func(i int) Outcome) {
	t.Helper()
	sent := make(chan Permit, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		i := 0
		for p := range sent {
			time.Sleep(time.Until(p.start.Add(rtt)))
			a.Release(p, outcome(i), 0, time.Now())
			i++
		}
	})
	defer close(sent)
	for range n {
		p := acquireWhenAllowed(t, a)
		time.Sleep(time.Until(p.start))
		sent <- p
	}
}

// settled paces testQueue of a at round trip rtt (pacedAfter), then lets three seconds pass
// without a decrease: longer than growthDoublings*growthDoubling, a settled rate.
func settled(t *testing.T, a *Adaptive, rtt time.Duration) {
	t.Helper()
	pacedAfter(t, a, 30, rtt)
	time.Sleep(3 * time.Second)
	require.Equal(t, 1, a.Queue(testQueue).Decreases)
}

// refuseFirst is an outcome that refuses the first n answers and accepts the others.
func refuseFirst(n int) func(int) Outcome {
	return func(i int) Outcome {
		if i < n {
			return Throttled
		}
		return Succeeded
	}
}

func TestABurstOfRefusalsCostsOneDecrease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A settled paced queue meets forty refusals in a row (a regional blip, a front end
		// shedding load for a moment), answered within spellGap. Were each refusal of a create
		// sent after the last decrease to lower the rate, the blip would cost forty decreases.
		// While no create sent after the decrease is accepted, the refusals within spellGap of
		// it are one burst: one decrease.
		const rtt = 20 * time.Millisecond
		a := New()
		settled(t, a, rtt)
		rate := a.Queue(testQueue).Rate
		require.Greater(t, 40/rate, 2*rtt.Seconds(), "creates sent after the decrease are refused too")
		require.Less(t, 40/rate+rtt.Seconds(), minSpellGap.Seconds(), "all within spellGap")
		answerPaced(t, a, rtt, 40, refuseFirst(40))
		got := a.Queue(testQueue)
		t.Logf("rate %.0f/s, then %.0f/s after forty refusals", rate, got.Rate)
		assert.Equal(t, 2, got.Decreases, "one decrease")

		// Refusals go on past spellGap: that is no burst, and the rate comes down again.
		time.Sleep(minSpellGap)
		answerPaced(t, a, rtt, 1, refuseFirst(1))
		assert.Equal(t, 3, a.Queue(testQueue).Decreases, "a refusal past spellGap")
	})
}

func TestTheRunThatEndedSlowStartCostsOneDecreaseWithinSpellGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The round trip after slow start's end brings more refusals of the creates sent
		// after it; until one of those is accepted, the refusals within spellGap are the tail
		// of the run that ended slow start, not news of a lower quota.
		const rtt = 20 * time.Millisecond
		a := New()
		decreased := throttleAfter(t, a, 30, rtt)
		answerPaced(t, a, rtt, 20, refuseFirst(20))
		require.Less(t, time.Since(decreased), minSpellGap)
		assert.Equal(t, 1, a.Queue(testQueue).Decreases, "within spellGap of slow start's end")
		time.Sleep(minSpellGap)
		answerPaced(t, a, rtt, 1, refuseFirst(1))
		assert.Equal(t, 2, a.Queue(testQueue).Decreases, "past it")
	})
}

func TestASettledSpellIsUndoneOnceItsBurstHasEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Forty refusals in a row, then burstClean acceptances: the refusals ended on their
		// own, and the rate was settled before them. A quota the rate ran into would give
		// acceptances among its refusals. The spell's decrease is undone: the rate is back
		// where it was, not left to grow back over seconds.
		const rtt = 20 * time.Millisecond
		a := New()
		settled(t, a, rtt)
		rate := a.Queue(testQueue).Rate
		answerPaced(t, a, rtt, 40+burstClean-1, refuseFirst(40))
		lowered := a.Queue(testQueue).Rate
		require.Less(t, lowered, rate)
		answerPaced(t, a, rtt, 1, refuseFirst(0))
		got := a.Queue(testQueue)
		t.Logf("rate %.0f/s, %.0f/s after forty refusals and %d acceptances, then %.0f/s", rate, lowered, burstClean-1, got.Rate)
		assert.InDelta(t, rate, got.Rate, 1e-9, "restored at the %d-th acceptance", burstClean)

		// Refusals with an acceptance among them are a quota's, or noise: not undone.
		b := New()
		settled(t, b, rtt)
		rate = b.Queue(testQueue).Rate
		answerPaced(t, b, rtt, 20+1+5+burstClean, func(i int) Outcome {
			if i < 20 || i > 20 && i <= 25 {
				return Throttled
			}
			return Succeeded
		})
		assert.Less(t, b.Queue(testQueue).Rate, rate, "an acceptance among the refusals: not undone")

		// Nor a run of fewer than burstMinRejected refusals: too short to tell a burst from
		// a quota's refusals.
		c := New()
		settled(t, c, rtt)
		rate = c.Queue(testQueue).Rate
		answerPaced(t, c, rtt, burstMinRejected-1+burstClean, refuseFirst(burstMinRejected-1))
		assert.Less(t, c.Queue(testQueue).Rate, rate, "%d refusals: not undone", burstMinRejected-1)

		// A spell that began at slow start's end is undone too: a burst in the middle of slow
		// start ends it, and once the burst is over slow start goes on from where it was.
		d := New()
		throttleAfter(t, d, 30, rtt)
		answerPaced(t, d, rtt, 10+burstClean, refuseFirst(10))
		got = d.Queue(testQueue)
		assert.Equal(t, 1, got.Decreases)
		assert.Zero(t, got.Rate, "back in slow start")
	})
}

func TestAPacedRateFarBelowSlowStartsEndStartsSlowStartAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Slow start now and then ends on noise, and once paced every refusal lowers the
		// rate: under a steady share of refusals it falls and falls. Below collapseShare of the
		// rate slow start's end set, slow start starts again, its limit at the paced pace (the
		// rate times the round trip), and goes on through such a share, taking the rate back
		// up.
		const rtt = 100 * time.Millisecond
		a := New()
		pacedAfter(t, a, 30, rtt)
		exit := a.Queue(testQueue).Rate
		var last float64
		for a.Queue(testQueue).Rate > 0 {
			last = a.Queue(testQueue).Rate
			require.GreaterOrEqual(t, last, collapseShare*exit, "paced while at least collapseShare of %.1f/s", exit)
			require.Less(t, a.Queue(testQueue).Decreases, 100, "never started slow start again")
			a.Release(acquireWhenAllowed(t, a), Throttled, 0, time.Now())
		}
		got := a.Queue(testQueue)
		t.Logf("slow start's end set %.1f/s; from %.1f/s, %d decreases on, slow start again: %+v", exit, last, got.Decreases, got)
		assert.Less(t, last*decreaseFactor, collapseShare*exit, "the decrease that took the rate below collapseShare")
		// At the paced pace, or at slow start's floor (initialRate) if that is more: here the
		// floor, since the paced rate fell below it.
		assert.InDelta(t, max(last*decreaseFactor, initialRate)*got.RTT.Seconds(), got.Limit, 1e-9, "at the paced pace or the floor")

		// Slow start grows on successes again.
		limit := got.Limit
		slowStartRounds(t, a, 1000, rtt, func(int) Outcome { return Succeeded })
		assert.Zero(t, a.Queue(testQueue).Rate)
		assert.Greater(t, a.Queue(testQueue).Limit, 10*limit)
	})
}
