// Package adaptive decides how fast a worker process sends creates to each
// Cloud Tasks queue: the writer engine's adaptive concurrency.
//
// Cloud Tasks answers RESOURCE_EXHAUSTED when a queue takes creates faster
// than its quota. Without a limit, each refused create retries on its own
// schedule. The retries keep the queue over its quota, and requests run out
// of attempts. The controller turns the service's answers into a limit per
// queue instead.
//
// # What is shared
//
// An Adaptive holds the state of every queue one client setting writes to.
// The sink keeps one Adaptive per client setting and worker process. Every
// engine, bundle and DoFn instance of the process shares it, so together
// they act as one client of the quota, however many they are. An engine
// calls Acquire before each create and starts it at the permit's Start. It
// gives the permit back to Release with the Outcome of the answer.
//
// # Slow start
//
// A queue starts in slow start, which bounds the creates in flight. It
// starts from one create, not from the engine's cap. A process, or many
// processes starting together, must not send a cap's worth into a quota
// nothing is known about.
//
// On top of the limit it has grown, slow start lets initialRate creates a
// second through. That floor is initialRate times the round trip in flight,
// so a long round trip does not start at one create per round trip. Before
// the first answer, the time the first create has waited stands for the
// round trip, up to maxUnanswered.
//
// Each success of a create sent while at least half the limit was in use
// adds one to the limit. The limit thus doubles every round trip while
// creates succeed. Slow start spreads a round trip's creates over it: a
// quota's bucket takes an even rate that it would refuse as one burst. Below
// a round trip of slowStartRound, a success adds only its share of one. A
// short round trip would otherwise double many times before the first
// refusal could come back. At the cap (the largest MaxInFlight of the
// engines using the queue), creates start at once. The limit still bounds
// what the whole process has in flight, and grows on while it is used.
//
// Slow start tolerates a steady share of refusals. A quota that the doubling
// limit runs into refuses a growing share within a round trip. A front end
// shedding load, or another job on the project's quota, refuses about the
// same share at any rate. So slow start ends only when the refusals since
// the first undecided one are clearly more than startNoise of the answers.
// Refusals before anything was accepted never end it: they say nothing of a
// rate. spell.go has these rules.
//
// # Paced
//
// A quota is a rate, so once slow start ends the queue is paced. Its creates
// start at a rate, evenly spaced, with no bound on how many are in flight. A
// concurrency limit cannot express a small share of a quota at a short
// round trip: that is less than one create in flight. The first rate is a
// little below (setPoint) what the queue accepted just before, read over at
// least firstReadSpan.
//
// A refusal of a create sent after the last decrease lowers the rate. So the
// rate comes down at most once per round trip, however many creates of that
// round trip are refused. It falls to the smaller of decreaseFactor times
// itself and setPoint times what the queue accepted lately. The rate thus
// follows the queue down within a round trip or two. What the queue
// accepted counts only if the rate held creates back lately: otherwise it
// is just what the process had to send. A round of mostly
// refusals soon after the last decrease is a storm: the rate falls to what
// the queue accepted since, but at most to half, once per spell of storms.
//
// While creates succeed and the rate holds them back, the rate grows. Growth
// is a share of the unit, the rate the first refusal set, but at most twice
// the rate now. Processes that started alike thus gain the same creates per
// second, and one left behind catches up. Growth starts gently after a
// decrease and doubles every growthDoubling, up to maxGrowthPerRound per
// round trip. After a quiet spell without a decrease, growth is a share of
// the rate itself if that is more. A rate then well past the rate last
// refused probes for room that peers have left.
//
// # Bursts and collapse
//
// A burst of refusals that ends on its own costs one decrease. This holds
// for a burst that meets slow start or a settled rate, one without a
// decrease for growthDoublings*growthDoubling. While nothing sent after the
// decrease has been accepted, further refusals within spellGap of it do not
// lower the rate again. Once burstClean acceptances follow a run of at least
// burstMinRejected refusals, the decrease is undone. A quota that a growing
// rate runs into gives acceptances among its refusals, so it is no burst.
//
// Once paced, every refusal lowers the rate, so a steady share of refusals
// makes it fall and fall. A paced rate that falls below collapseShare of the
// rate slow start ended at therefore starts slow start again, at its current
// pace. Slow start goes on through such a share and takes the rate back up.
//
// # Start rate
//
// An engine may give a start rate: its share of the quota, the quota over
// the processes that share it. A queue first used by such an engine starts
// paced at that rate. It skips slow start's ramp and the burst of refusals
// that comes when processes in slow start together empty the queue's bucket.
// Each decrease stops a little below the smaller of the rate and the start
// rate (softenDecrease), and growth near the start rate holds until a quiet
// spell has passed (holdsShare). Every process that shares the quota then
// comes down alike, and peers at their shares stay near them. A few rounds of mostly refusals in a row give the start rate
// up: it was far too high.
//
// # RetryInfo
//
// A RESOURCE_EXHAUSTED answer may carry a google.rpc.RetryInfo delay. The
// queue's creates then pause until the delay has passed, for at most
// MaxRetryDelay. The engine also holds the refused request back at least
// that long before its next attempt.
//
// docs/performance-history.md, "Why the controller's constants are what they are",
// gives the measurements behind each constant.
package adaptive
