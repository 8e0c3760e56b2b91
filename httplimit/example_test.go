package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/httplimit"
)

// A handler behind two policies decided in one CL.THROTTLEALL: at most 2
// requests at once and then 1 per second, and 100 per hour. The third
// request is refused; it consumed nothing from "hourly".
func Example() {
	srv, err := startCellserver() // a cellserver in this process, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	limit, err := httplimit.Middleware(rdb, []httplimit.Policy{
		{Name: "burst", Burst: 1, Count: 1, Period: time.Second},
		{Name: "hourly", Burst: 99, Count: 100, Period: time.Hour},
	},
		httplimit.ByIP(netip.MustParsePrefix("10.0.0.0/8")), // trust X-Forwarded-For from 10/8
		httplimit.WithFailClosed(),
		httplimit.WithTimeout(5*time.Second), // generous for a test machine; the default is 100 ms
	)
	if err != nil {
		log.Fatal(err)
	}
	api := limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	}))

	var rec *httptest.ResponseRecorder
	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "10.0.0.2:4321"                  // the load balancer
		req.Header.Set("X-Forwarded-For", "198.51.100.7") // the client
		rec = httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("RateLimit"))
		if rec.Code == http.StatusTooManyRequests {
			fmt.Println("Retry-After:", rec.Header().Get("Retry-After"))
			fmt.Println(rec.Body.String())
		}
	}
	fmt.Println("RateLimit-Policy:", rec.Header().Get("RateLimit-Policy"))
	// Output:
	// 200 "burst";r=1;t=1, "hourly";r=99;t=36
	// 200 "burst";r=0;t=2, "hourly";r=98;t=72
	// 429 "burst";r=0;t=2, "hourly";r=98;t=72
	// Retry-After: 1
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"Too many requests: retry in 1 s.","violated-policies":["burst"]}
	// RateLimit-Policy: "burst";q=2;w=2, "hourly";q=100;w=3600
}

// A Limiter decides without HTTP: here, one token-bucket policy for a job
// queue, taking 3 tokens.
func ExampleLimiter_AllowN() {
	srv, err := startCellserver()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()

	l, err := httplimit.NewLimiter(rdb, []httplimit.Policy{
		{Name: "jobs", Algorithm: httplimit.TokenBucket, Burst: 10, Count: 1, Period: time.Second},
	}, httplimit.WithTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	d, err := l.AllowN(context.Background(), "tenant:7", 3)
	if err != nil {
		log.Fatal(err) // no decision: fail open or closed
	}
	r := d.Results[0]
	fmt.Println(d.Allowed, r.Limit, r.Remaining, r.ResetAfter)
	fmt.Println(l.ServerKey("jobs", "tenant:7"))
	// Output:
	// true 10 7 3s
	// jobs:{tenant:7}
}
