package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// dialMany opens n WebSockets to url, at most 100 handshakes at a time.
// It fails on the first connection that cannot open: a cell with a
// failure has no data.
func dialMany(ctx context.Context, url string, n int) ([]*websocket.Conn, error) {
	conns := make([]*websocket.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 100)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, _, err := websocket.Dial(ctx, url, nil)
			if err != nil {
				errs <- fmt.Errorf("connection %d of %d: %w", i+1, n, err)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		closeAll(conns)
		return nil, err
	}
	return conns, nil
}

func closeAll(conns []*websocket.Conn) {
	for _, c := range conns {
		if c != nil {
			c.CloseNow()
		}
	}
}

// echoRate runs echo round trips (a 32-byte text message out, the same
// back) on conns connections for d and returns round trips a second and
// the 99th percentile of a round trip.
func echoRate(url string, conns int, d time.Duration) (perSec float64, p99 time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	cs, err := dialMany(ctx, url, conns)
	if err != nil {
		return 0, 0, err
	}
	defer closeAll(cs)
	msg := []byte(strings.Repeat("x", 32))
	var total atomic.Int64
	lat := make([][]time.Duration, conns)
	errs := make(chan error, conns)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
					errs <- err
					return
				}
				_, b, err := c.Read(ctx)
				if err != nil {
					errs <- err
					return
				}
				if len(b) != len(msg) {
					errs <- fmt.Errorf("echo of %d bytes, sent %d", len(b), len(msg))
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		p99 = all[len(all)*99/100]
	}
	return float64(total.Load()) / elapsed.Seconds(), p99, nil
}

// fanout connects n listeners to url (/fanout), waits until the server
// counts them all, then has one of them publish msgs messages one after
// the other, and returns for each the time until every listener had it.
func fanout(url string, n, msgs int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs, err := dialMany(ctx, url, n)
	if err != nil {
		return nil, err
	}
	defer closeAll(cs)
	pub := cs[0]
	// Listeners deliver "seq K" arrivals here; the publisher's own reads
	// too (it is a listener), with its answers to "count".
	type arrival struct {
		seq int
		at  time.Time
	}
	arrivals := make(chan arrival, n)
	counts := make(chan string, 1)
	errs := make(chan error, n)
	for i, c := range cs {
		go func() {
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				at := time.Now()
				s := string(b)
				if strings.HasPrefix(s, "count ") {
					if i == 0 {
						counts <- s
					}
					continue
				}
				seq, _ := strconv.Atoi(strings.TrimPrefix(strings.Fields(s)[0], "seq"))
				arrivals <- arrival{seq, at}
			}
		}()
	}
	// The server adds a listener on its open event, after the handshake:
	// ask until all are counted.
	for want := "count " + strconv.Itoa(n); ; time.Sleep(50 * time.Millisecond) {
		if err := pub.Write(ctx, websocket.MessageText, []byte("count")); err != nil {
			return nil, err
		}
		select {
		case got := <-counts:
			if got == want {
				goto counted
			}
		case err := <-errs:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
counted:
	var times []time.Duration
	pad := strings.Repeat("x", 64)
	for k := 1; k <= msgs; k++ {
		sent := time.Now()
		if err := pub.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf("seq%d %s", k, pad))); err != nil {
			return nil, err
		}
		var last time.Time
		for got := 0; got < n; {
			select {
			case a := <-arrivals:
				if a.seq != k {
					return nil, fmt.Errorf("message %d arrived while waiting for %d", a.seq, k)
				}
				got++
				if a.at.After(last) {
					last = a.at
				}
			case err := <-errs:
				return nil, err
			case <-ctx.Done():
				return nil, fmt.Errorf("message %d: %w", k, ctx.Err())
			}
		}
		times = append(times, last.Sub(sent))
		time.Sleep(20 * time.Millisecond) // let the server's writes drain
	}
	return times, nil
}
