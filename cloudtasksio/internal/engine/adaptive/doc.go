// Package adaptive is the adaptive concurrency controller of the writer
// engine: how many creates a worker process starts to one
// queue, driven by the service's answers. Cloud Tasks answers
// RESOURCE_EXHAUSTED when a queue takes creates faster than its quota; without
// a limit every request then retries on its own schedule, the retries keep the
// queue over its quota, and requests run out of attempts. Each queue's state
// goes through two phases (a queue given a start rate skips the first, see
// the third point):
//
//   - Slow start. A queue no create has been rejected for starts with one
//     create in flight, not with the cap: a worker process that starts, or a
//     pipeline that starts many processes at once, does not send a whole cap's
//     worth into a quota it knows nothing about. On top of the limit slow
//     start grows from initialLimit (zero), it lets initialRate creates a
//     second through: initialRate times the round trip in flight once an
//     answer tells the round trip, and before that initialRate times the time
//     the first unanswered create has waited, up to maxUnanswered (the round
//     trip is at least that long), so a long round trip does not start at one
//     create per round trip, and a short one does not start at one create in
//     flight, 200 creates a second at 5 ms. One create may always be in
//     flight; below one, the limit paces it over more than a round trip.
//     Every create that succeeds
//     while the limit was at least half used raises the limit by
//     slowStartGrowth (one), and the creates of a round trip go out at 1 +
//     slowStartGrowth times the limit's rate, so the limit doubles every round
//     trip while creates succeed, to the cap (the largest MaxInFlight of the
//     engines using the queue), where it stops spreading creates over the round
//     trip but keeps bounding what all the engines of the process have in
//     flight together, growing on while that is used: sixty-four DoFn instances
//     of a cap of 1,000 each would otherwise have 64,000 creates in flight when
//     the first rejection of a deep bucket comes back. Below a round trip of
//     slowStartRound each success adds only its share of rtt/slowStartRound, so
//     the limit doubles about once per slowStartRound of time however short the
//     round trip: a quota's bucket hides the quota until it is empty, and at 5
//     ms a bucket of a tenth of a second lasts twenty round trips, in which
//     doubling every round trip would reach many times the quota before the
//     first rejection came back. A pipeline that is never throttled reaches the
//     cap within about log2(cap) round trips (or slowStartRounds) of its first
//     create to the queue and keeps it for the life of the process.
//   - Paced. RESOURCE_EXHAUSTED answers that are clearly a quota's (more than
//     a steady share of noise, spell.go) end slow start: a
//     quota is a rate, so from then on the process starts the queue's creates
//     at a rate, spaced evenly, instead of bounding how many are in flight (at
//     a 5 ms round trip, a quota of 1,000/s shared by eight processes is less
//     than one create in flight per process, which no concurrency limit can
//     express). The rate starts at the rate at which the queue accepted the
//     process's creates just before, over at least firstReadSpan (the bucket
//     that hid the quota gave its tokens on top of it), a little below it
//     (setPoint). A
//     RESOURCE_EXHAUSTED answer to a create started after the last decrease
//     lowers it, at most once per round trip however many creates of that round
//     are rejected, to the smaller of decreaseFactor times itself and setPoint
//     times the rate the queue accepted over the last two round trips since
//     the first rejection (read over at least acceptedMinCount acceptances, so
//     a process with a small share is not steered by two or three; before the
//     first rejection the queue's bucket was emptying, and what it accepted
//     then says nothing of the quota): after a burst, or when other processes
//     take most of the quota, the rate falls to what the queue takes from this
//     process in one or two round trips instead of ten percent per round trip.
//     While creates succeed and the rate is what holds them back, it grows by
//     growthPerSecond of the rate the first rejection set (or the start rate,
//     below), or of twice the
//     rate if that is less (plus growthFloor), per second: by the same creates
//     per second for every process that started with the same share, whatever
//     its rate is now, so that a process left behind by its decreases gains on
//     the others instead of keeping a smaller share for good (growing by a
//     share of its own rate, it would finish its work last while the others'
//     share stood unused), and by at most twice as much as its rate's share
//     for a process that paced the queue alone before others joined. That growth
//     doubles with every growthDoubling without a decrease, up to
//     2^growthDoublings times and to at most maxGrowthPerRound per round trip:
//     just after a decrease the rate probes gently, near the quota it found.
//     After growthDoublings*growthDoubling without a decrease the rate grows by
//     a share of itself, if that is more: a process left alone with a quota
//     its peers stopped using (they finished, or scaled down) grows into it
//     within seconds instead of a minute, and the decrease that ends such a
//     spell sets the rate growth is a share of anew. Once the rate has then
//     also grown probeMargin past the rate the queue last refused, the quota
//     has room it had not then, and the rate probes for it: it grows by a
//     share of itself per round trip that doubles every round trip, up to
//     probeGrowth (probe). At 200 ms a process left alone with the quota eight
//     shared takes it up in about four seconds instead of thirteen.
//     A decrease a few round trips after the last, when most answers since
//     were rejections (more rejections than acceptances, and at least
//     stormMinRejected rejections), sets the rate a little below what the
//     queue accepted since, but to no less than half the rate before it: just
//     after the first rejection of processes that started together, each
//     paces at what the queue accepted while its bucket emptied, several times
//     its share, and a tenth per round trip would take many round trips of
//     rejections to reach it.
//   - A start rate (Options.StartRate) skips slow start: a queue first used
//     by an engine that has one starts paced at it, as if a rejection had just
//     set it there (startPaced). The caller knows its share of the quota (the
//     quota divided by the processes that share it) and so spends neither
//     slow start's ramp, which at 200 ms takes over a second to reach a
//     quota of 1,000/s, nor the burst of rejections that comes when the
//     processes of a job in slow start together empty the queue's bucket. A
//     start rate above the share costs rejections until the decreases bring
//     it down; one below it costs throughput until growth and then the probe
//     take the rate past it, a few seconds. The start rate also bounds the
//     decreases (softenDecrease): one rejection since the last decrease
//     takes the rate no further than loneRejectionFactor below the smaller
//     of the rate and the start rate, more no further than decreaseFactor
//     below it, because a process told its share that is refused there
//     learns only that some peers grew past theirs or that the shares add up
//     to more than the quota, and every process that shares the quota should
//     come down alike. After shareStormLimit decreases in a row whose rounds
//     were mostly rejections the start rate is given up: it was far too
//     high. And near the start rate (from it to shareHoldBand above it)
//     the rate holds until a quiet spell has passed: it grows by
//     growthFloor a second only until growthDoublings*growthDoubling have
//     gone without a decrease (holdsShare), since the shares add up to the
//     quota and growth past one finds room only where peers left it; then it
//     grows from the gentle pace of a queue just after a decrease. A start
//     rate below the share therefore costs that spell before growth takes the
//     rate past it.
//   - A google.rpc.RetryInfo detail in a RESOURCE_EXHAUSTED answer pauses the
//     queue's creates until its delay has passed, and the rejected request
//     waits at least that long before its next attempt.
//
// The state lives in an Adaptive; the sink keeps one per client setting and
// worker process, so every engine, bundle and DoFn instance of the process
// that writes to a queue shares that queue's limit and rate: they act as one
// client of the quota, whatever their number.
package adaptive
