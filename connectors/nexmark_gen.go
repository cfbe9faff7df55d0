package connectors

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"sync"
)

// The Nexmark event model (docs/nexmark.md): the parameters of the standard generator
// (nexmark-flink's NexmarkConfiguration and GeneratorConfig defaults, which the published
// suites run with).
const (
	nexmarkPersonProportion  = 1
	nexmarkAuctionProportion = 3
	nexmarkBidProportion     = 46
	nexmarkTotalProportion   = nexmarkPersonProportion + nexmarkAuctionProportion + nexmarkBidProportion

	nexmarkFirstPersonID   = 1000
	nexmarkFirstAuctionID  = 1000
	nexmarkFirstCategoryID = 10
	nexmarkNumCategories   = 5

	nexmarkActivePeople     = 1000 // people considered for new auctions and bids
	nexmarkInFlightAuctions = 100  // auctions considered for new bids
	nexmarkIDLead           = 10   // ids ahead of the last one a bid or auction may name

	// A bid is for a hot auction with probability 1 - 1/hotAuctionRatio, by a hot bidder with
	// 1 - 1/hotBiddersRatio; an auction is by a hot seller with 1 - 1/hotSellersRatio. The hot
	// one is the first of the last batch of 100 auctions / people (the second for bidders, so
	// hot bidders and hot sellers differ).
	nexmarkHotAuctionRatio = 2
	nexmarkHotSellersRatio = 4
	nexmarkHotBiddersRatio = 4
	nexmarkHotBatch        = 100

	nexmarkAvgPersonBytes  = 200
	nexmarkAvgAuctionBytes = 500
	nexmarkAvgBidBytes     = 100

	nexmarkChannels     = 10000
	nexmarkMinStringLen = 3
)

// NexmarkKind is which of the three Nexmark event types an event is.
type NexmarkKind uint8

const (
	NexmarkPerson NexmarkKind = iota + 1
	NexmarkAuction
	NexmarkBid
)

func (k NexmarkKind) String() string {
	switch k {
	case NexmarkPerson:
		return "person"
	case NexmarkAuction:
		return "auction"
	case NexmarkBid:
		return "bid"
	}
	return "unknown"
}

// NexmarkPersonEvent is a new person (a seller or bidder). Times are epoch milliseconds.
type NexmarkPersonEvent struct {
	ID                                          int64
	Name, EmailAddress, CreditCard, City, State string
	DateTime                                    int64
	Extra                                       string
}

// NexmarkAuctionEvent is a new auction.
type NexmarkAuctionEvent struct {
	ID                                     int64
	ItemName, Description                  string
	InitialBid, Reserve, DateTime, Expires int64
	Seller, Category                       int64
	Extra                                  string
}

// NexmarkBidEvent is a bid on an auction.
type NexmarkBidEvent struct {
	Auction, Bidder, Price int64
	Channel, URL           string
	DateTime               int64
	Extra                  string
}

// NexmarkGenerator computes Nexmark events by event number. Event n (0-based) is a pure
// function of (seed, n, event rate, base time): there is no state, so any subset of event
// numbers (a split, a resumed reader) yields exactly the events a single pass would. It is
// safe for concurrent use.
type NexmarkGenerator struct {
	seed      uint64
	eventRate int64 // events per second of event time
	baseTime  int64 // event time of event 0, epoch ms
}

// NewNexmarkGenerator returns the generator for a seed, an event-time rate (events per
// second, > 0) and the event time of event 0 (epoch ms).
func NewNexmarkGenerator(seed uint64, eventRate, baseTime int64) *NexmarkGenerator {
	if eventRate <= 0 {
		eventRate = DefaultNexmarkEventRate
	}
	nexmarkTablesOnce.Do(buildNexmarkTables)
	return &NexmarkGenerator{seed: seed, eventRate: eventRate, baseTime: baseTime}
}

// Kind is the type of event n: of every 50 consecutive event numbers the first is a
// person, the next 3 are auctions and the other 46 bids.
func NexmarkKindOf(n int64) NexmarkKind {
	switch r := n % nexmarkTotalProportion; {
	case r < nexmarkPersonProportion:
		return NexmarkPerson
	case r < nexmarkPersonProportion+nexmarkAuctionProportion:
		return NexmarkAuction
	}
	return NexmarkBid
}

// Timestamp is the event time of event n: base time + n / event rate, in whole milliseconds.
func (g *NexmarkGenerator) Timestamp(n int64) int64 {
	r := g.eventRate
	return g.baseTime + (n/r)*1000 + (n%r)*1000/r
}

// lastPerson is the base-0 id of the last person generated at or before event n.
func lastPerson(n int64) int64 {
	epoch, off := n/nexmarkTotalProportion, n%nexmarkTotalProportion
	if off >= nexmarkPersonProportion {
		off = nexmarkPersonProportion - 1
	}
	return epoch*nexmarkPersonProportion + off
}

// lastAuction is the base-0 id of the last auction generated at or before event n.
func lastAuction(n int64) int64 {
	epoch, off := n/nexmarkTotalProportion, n%nexmarkTotalProportion
	switch {
	case off < nexmarkPersonProportion:
		epoch--
		off = nexmarkAuctionProportion - 1
	case off >= nexmarkPersonProportion+nexmarkAuctionProportion:
		off = nexmarkAuctionProportion - 1
	default:
		off -= nexmarkPersonProportion
	}
	return epoch*nexmarkAuctionProportion + off
}

// randomPerson picks one of the active people (the last 1,000) or a few ids ahead.
func randomPerson(n int64, r *nexRand) int64 {
	people := lastPerson(n) + 1
	active := min(people, nexmarkActivePeople)
	return people - active + r.int63n(active+nexmarkIDLead)
}

// randomAuction picks one of the auctions likely in flight (the last 100) or a few ahead.
func randomAuction(n int64, r *nexRand) int64 {
	last := lastAuction(n)
	lo := max(last-nexmarkInFlightAuctions, 0)
	return lo + r.int63n(last-lo+1+nexmarkIDLead)
}

// nextPrice is log-uniform over [1, 10^6) dollars, in cents: round(100 * 10^(6u)) for a
// uniform u, as the reference computes it. 10^(6u) is a table entry for u's top 12 bits
// times 10^(6 * the rest), the latter from its Taylor series (relative error below 1e-8,
// which moves a price by at most a cent; math.Pow took a tenth of a bid's generation).
func nextPrice(r *nexRand) int64 {
	x := r.next()
	hi := x >> (64 - nexmarkPriceBits)
	// The rest as a fraction of one table step, times the step's exponent: ln(10) * 6 / 4096.
	d := float64(x<<nexmarkPriceBits>>11) / (1 << 53) * (math.Ln10 * 6 / (1 << nexmarkPriceBits))
	return int64(math.Round(nexmarkPriceTable[hi] * (1 + d + d*d/2)))
}

const nexmarkPriceBits = 12

// nexmarkPriceTable[i] is 100 * 10^(6i/4096).
var nexmarkPriceTable = func() (t [1 << nexmarkPriceBits]float64) {
	for i := range t {
		t[i] = 100 * math.Pow(10, 6*float64(i)/(1<<nexmarkPriceBits))
	}
	return
}()

// Streams of the per-event random numbers: every field draws from its own stream, so a
// field can be computed without the others.
const (
	streamAuction uint64 = iota + 1
	streamBidder
	streamPrice
	streamChannel
	streamExtra
	streamName
	streamEmail
	streamCard
	streamCity
	streamState
	streamSeller
	streamCategory
	streamInitial
	streamReserve
	streamExpires
	streamItem
	streamDesc
)

func (g *NexmarkGenerator) rand(n int64, stream uint64) nexRand {
	return nexRand{s: mix64(g.seed+uint64(n)*0x9e3779b97f4a7c15) ^ stream*0xd1b54a32d192ed03}
}

// BidAuction is the auction id of bid event n.
func (g *NexmarkGenerator) BidAuction(n int64) int64 {
	r := g.rand(n, streamAuction)
	var a int64
	if r.intn(nexmarkHotAuctionRatio) > 0 {
		a = lastAuction(n) / nexmarkHotBatch * nexmarkHotBatch
	} else {
		a = randomAuction(n, &r)
	}
	return a + nexmarkFirstAuctionID
}

// BidBidder is the bidder (person id) of bid event n. The reference generator adds the
// first person id twice here; this one adds it once, so bidders are person ids.
func (g *NexmarkGenerator) BidBidder(n int64) int64 {
	r := g.rand(n, streamBidder)
	var b int64
	if r.intn(nexmarkHotBiddersRatio) > 0 {
		b = lastPerson(n)/nexmarkHotBatch*nexmarkHotBatch + 1
	} else {
		b = randomPerson(n, &r)
	}
	return b + nexmarkFirstPersonID
}

// BidPrice is the price (cents) of bid event n.
func (g *NexmarkGenerator) BidPrice(n int64) int64 {
	r := g.rand(n, streamPrice)
	return nextPrice(&r)
}

// BidChannel is the channel and url of bid event n: half the bids come through one of four
// hot channels, the others through one of 10,000 channels.
func (g *NexmarkGenerator) BidChannel(n int64) (channel, url string) {
	r := g.rand(n, streamChannel)
	if r.intn(2) > 0 {
		i := r.intn(len(nexmarkHotChannels))
		return nexmarkHotChannels[i], nexmarkHotURLs[i]
	}
	c := &nexmarkChannelTable[r.intn(nexmarkChannels)]
	return c.channel, c.url
}

// BidExtra is the padding of bid event n (the bid's idealized size averages 100 bytes).
func (g *NexmarkGenerator) BidExtra(n int64) string {
	r := g.rand(n, streamExtra)
	return nextExtra(&r, 8+8+8+8, nexmarkAvgBidBytes)
}

// Bid is bid event n (which must be of kind NexmarkBid).
func (g *NexmarkGenerator) Bid(n int64) NexmarkBidEvent {
	ch, url := g.BidChannel(n)
	return NexmarkBidEvent{Auction: g.BidAuction(n), Bidder: g.BidBidder(n), Price: g.BidPrice(n),
		Channel: ch, URL: url, DateTime: g.Timestamp(n), Extra: g.BidExtra(n)}
}

// Person is person event n (which must be of kind NexmarkPerson).
func (g *NexmarkGenerator) Person(n int64) NexmarkPersonEvent {
	p := NexmarkPersonEvent{ID: lastPerson(n) + nexmarkFirstPersonID, DateTime: g.Timestamp(n)}
	r := g.rand(n, streamName)
	p.Name = nexmarkPersonNames[r.intn(len(nexmarkPersonNames))]
	r = g.rand(n, streamEmail)
	p.EmailAddress = nextString(&r, 7) + "@" + nextString(&r, 5) + ".com"
	r = g.rand(n, streamCard)
	var card [19]byte
	for i := 0; i < 4; i++ {
		d := r.intn(10000)
		o := i * 5
		if i > 0 {
			card[o-1] = ' '
		}
		card[o], card[o+1], card[o+2], card[o+3] = byte('0'+d/1000), byte('0'+d/100%10), byte('0'+d/10%10), byte('0'+d%10)
	}
	p.CreditCard = string(card[:])
	r = g.rand(n, streamCity)
	p.City = nexmarkCities[r.intn(len(nexmarkCities))]
	r = g.rand(n, streamState)
	p.State = nexmarkStates[r.intn(len(nexmarkStates))]
	r = g.rand(n, streamExtra)
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = nextExtra(&r, size, nexmarkAvgPersonBytes)
	return p
}

// Auction is auction event n (which must be of kind NexmarkAuction).
func (g *NexmarkGenerator) Auction(n int64) NexmarkAuctionEvent {
	ts := g.Timestamp(n)
	a := NexmarkAuctionEvent{ID: lastAuction(n) + nexmarkFirstAuctionID, DateTime: ts}
	r := g.rand(n, streamSeller)
	if r.intn(nexmarkHotSellersRatio) > 0 {
		a.Seller = lastPerson(n) / nexmarkHotBatch * nexmarkHotBatch
	} else {
		a.Seller = randomPerson(n, &r)
	}
	a.Seller += nexmarkFirstPersonID
	r = g.rand(n, streamCategory)
	a.Category = nexmarkFirstCategoryID + int64(r.intn(nexmarkNumCategories))
	r = g.rand(n, streamInitial)
	a.InitialBid = nextPrice(&r)
	r = g.rand(n, streamReserve)
	a.Reserve = a.InitialBid + nextPrice(&r)
	// An auction lasts on average as long as it takes to generate 100 more auctions.
	r = g.rand(n, streamExpires)
	horizon := g.Timestamp(n+nexmarkInFlightAuctions*nexmarkTotalProportion/nexmarkAuctionProportion) - ts
	a.Expires = ts + 1 + r.int63n(max(horizon*2, 1))
	r = g.rand(n, streamItem)
	a.ItemName = nextString(&r, 20)
	r = g.rand(n, streamDesc)
	a.Description = nextString(&r, 100)
	r = g.rand(n, streamExtra)
	a.Extra = nextExtra(&r, 8+len(a.ItemName)+len(a.Description)+8+8+8+8+8, nexmarkAvgAuctionBytes)
	return a
}

// nextString is a random string of 3 to max-1 characters, a letter or (1 in 13) a space,
// with the spaces at either end trimmed. It is a slice of a pool of such characters.
func nextString(r *nexRand, max int) string {
	n := nexmarkMinStringLen + r.intn(max-nexmarkMinStringLen)
	off := r.intn(len(nexmarkTextPool) - n)
	return strings.Trim(nexmarkTextPool[off:off+n], " ")
}

// nextExtra pads an event whose fields take current bytes to avg bytes on average: a
// random length within ±20 % of the difference, taken from the 1 MiB padding string.
func nextExtra(r *nexRand, current, avg int) string {
	if current > avg {
		return ""
	}
	avg -= current
	delta := int(math.Round(float64(avg) * 0.2))
	size := avg - delta
	if delta > 0 {
		size += r.intn(2 * delta)
	}
	off := r.intn(len(nexmarkExtraPool) - size)
	return nexmarkExtraPool[off : off+size]
}

// nexRand is a splitmix64 stream: a few nanoseconds per draw and no allocation.
type nexRand struct{ s uint64 }

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *nexRand) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// intn is uniform over [0, n) for 0 < n < 2^32 (Lemire's multiply-shift).
func (r *nexRand) intn(n int) int {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}

// int63n is uniform over [0, n) for n > 0.
func (r *nexRand) int63n(n int64) int64 {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int64(hi)
}

// float64 is uniform over [0, 1).
func (r *nexRand) float64() float64 { return float64(r.next()>>11) / (1 << 53) }

// The fixed value spaces of the model, built once from a fixed seed (they do not depend on
// a source's seed, as in the reference, where they are class constants).
var (
	nexmarkTablesOnce   sync.Once
	nexmarkExtraPool    string // 1 MiB of padding characters
	nexmarkTextPool     string // 64 KiB of letters and spaces for names and descriptions
	nexmarkHotURLs      [4]string
	nexmarkChannelTable []nexmarkChannel
	nexmarkPersonNames  []string

	nexmarkHotChannels = [4]string{"Google", "Facebook", "Baidu", "Apple"}
	nexmarkStates      = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	nexmarkCities      = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend",
		"Redmond", "Seattle", "Kent", "Cheyenne"}
	nexmarkFirstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	nexmarkLastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

type nexmarkChannel struct{ channel, url string }

func buildNexmarkTables() {
	r := nexRand{s: 0x6e65786d61726b} // "nexmark"
	// Padding: lowercase letters. (The reference means the same, 'a' + x % 26, but takes x
	// from a signed int, so a third of its characters fall below 'a', from 'H' to '`'.)
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte('a' + r.intn(26))
	}
	nexmarkExtraPool = string(b)
	t := make([]byte, 64<<10)
	for i := range t {
		if r.intn(13) == 0 {
			t[i] = ' '
		} else {
			t[i] = byte('a' + r.intn(26))
		}
	}
	nexmarkTextPool = string(t)
	for i := range nexmarkHotURLs {
		nexmarkHotURLs[i] = nexmarkBaseURL(&r)
	}
	nexmarkChannelTable = make([]nexmarkChannel, nexmarkChannels)
	for i := range nexmarkChannelTable {
		url := nexmarkBaseURL(&r)
		if r.intn(10) > 0 {
			// |bit-reversed i| as a 32-bit integer (the reference's Math.abs(Integer.reverse(i)),
			// which leaves MinInt32 negative).
			v := int32(bits.Reverse32(uint32(i)))
			if v < 0 && v != math.MinInt32 {
				v = -v
			}
			url += "&channel_id=" + strconv.Itoa(int(v))
		}
		nexmarkChannelTable[i] = nexmarkChannel{channel: "channel-" + strconv.Itoa(i), url: url}
	}
	for _, f := range nexmarkFirstNames {
		for _, l := range nexmarkLastNames {
			nexmarkPersonNames = append(nexmarkPersonNames, f+" "+l)
		}
	}
}

// nexmarkBaseURL is https://www.nexmark.com/<a>/<b>/<c>/item.htm?query=1 with three random
// path parts of 3 or 4 characters (letters, 1 in 13 an underscore).
func nexmarkBaseURL(r *nexRand) string {
	var sb strings.Builder
	sb.WriteString("https://www.nexmark.com/")
	for p := 0; p < 3; p++ {
		n := nexmarkMinStringLen + r.intn(5-nexmarkMinStringLen)
		for i := 0; i < n; i++ {
			if r.intn(13) == 0 {
				sb.WriteByte('_')
			} else {
				sb.WriteByte(byte('a' + r.intn(26)))
			}
		}
		sb.WriteByte('/')
	}
	sb.WriteString("item.htm?query=1")
	return sb.String()
}
