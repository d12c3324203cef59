// chaos: a TLS proxy between luaop and a real API server that misbehaves
// the ways API servers, their load balancers and networks do, by a seeded
// schedule (test and benchmark tooling only: never part of luaop).
//
//	chaos -upstream FILE -dir DIR [-seed N] [-rate P] [-watch-rate P] [-watch-timeout S] [-faults a,b,...]
//	      [-strip-shard-selector RESOURCES]
//
// FILE is `kubectl config view --raw --minify --flatten -o json` of the
// real API server's admin. The proxy terminates TLS with a certificate of
// its own (DIR/ca.crt), writes DIR/kubeconfig naming itself for luaop and
// DIR/port, and sends each request upstream with the admin's credentials.
// Each request draws from a random source seeded by -seed: with
// probability -rate (a watch: -watch-rate) it gets one fault of those its
// kind can get:
//
//	every request  429 or 503 with Retry-After: 1 (not sent upstream)
//	reads, writes  reset: the answer cut off halfway (a write is made
//	               upstream first), slow: the answer 50 ms a line or chunk
//	watches        gone: an ERROR event, 410 Expired; status: an ERROR
//	               event, 500; reset: the stream cut off within 0.2-3 s;
//	               truncate: half a line, then cut; garble: a line made
//	               junk; oversize: a line of 20 MiB; stall: 3 s without a
//	               byte, then on; dup: a line twice; reorder: two lines
//	               swapped; noend: a streamed list's initial-events-end
//	               bookmark dropped
//
// Every fault is a line on stderr ("chaos: FAULT METHOD PATH") and a count
// in GET /chaos/stats (answered by the proxy, with the requests and the
// faults by kind); a watch's fault counts when the stream applies it (one
// drawn for a watch refused upstream, or ended before its moment, never
// reached the client). GET /chaos/pause stops new faults, /chaos/resume starts
// them again.
package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	mrand "math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

type kubeconfig struct {
	Clusters []struct {
		Cluster struct {
			Server string `json:"server"`
			CAData string `json:"certificate-authority-data"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		User struct {
			CertData string `json:"client-certificate-data"`
			KeyData  string `json:"client-key-data"`
			Token    string `json:"token"`
		} `json:"user"`
	} `json:"users"`
}

// stripShard: resources (or "*") whose shardSelector the proxy drops
// (-strip-shard-selector): luaop then meets a server that does not shard
// them, on the same API server as ones it does.
var stripShard = map[string]bool{}

// resourceOf: the resource a request path names (.../RESOURCE or
// .../RESOURCE/NAME under /api/v1 or /apis/GROUP/VERSION, namespaced or not).
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	i := 2 // /api/v1/...
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3
	}
	if len(parts) > i+1 && parts[i] == "namespaces" && len(parts) > i+2 {
		i += 2
	}
	if len(parts) > i {
		return parts[i]
	}
	return ""
}

var (
	mu      sync.Mutex
	rng     *mrand.Rand
	paused  bool
	counts  = map[string]int{}
	enabled = map[string]bool{}
	rate    float64
	// watches are few (each lasts minutes): a rate of their own
	watchRate float64
	// a load balancer's timeout: every watch ended cleanly within this
	// (seconds; 0: never), so that watches come again and draw again
	watchTimeout float64
)

var (
	anyFaults   = []string{"429", "503"}
	readFaults  = []string{"reset", "slow"}
	watchFaults = []string{"gone", "status", "reset", "truncate", "garble", "oversize", "stall", "dup", "reorder", "noend"}
)

// draw picks this request's fault ("" for none) among those it can get.
func draw(p float64, kinds ...[]string) string {
	mu.Lock()
	defer mu.Unlock()
	counts["requests"]++
	if paused || rng.Float64() >= p {
		return ""
	}
	var pool []string
	for _, ks := range kinds {
		for _, k := range ks {
			if enabled[k] {
				pool = append(pool, k)
			}
		}
	}
	if len(pool) == 0 {
		return ""
	}
	return pool[rng.Intn(len(pool))]
}

func count(fault string, r *http.Request) {
	mu.Lock()
	counts["fault "+fault]++
	mu.Unlock()
	log.Printf("chaos: %s %s %s", fault, r.Method, r.URL.RequestURI())
}

func between(lo, hi float64) time.Duration {
	mu.Lock()
	defer mu.Unlock()
	return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(time.Second))
}

func main() {
	upstream := flag.String("upstream", "", "the upstream admin kubeconfig, as kubectl config view --raw --minify --flatten -o json")
	dir := flag.String("dir", "", "where to write ca.crt, kubeconfig and port")
	seed := flag.Int64("seed", 1, "the random source's seed")
	flag.Float64Var(&rate, "rate", 0.2, "the probability that a request gets a fault")
	flag.Float64Var(&watchRate, "watch-rate", -1, "the probability that a watch gets a fault (default: -rate)")
	flag.Float64Var(&watchTimeout, "watch-timeout", 0, "end every watch cleanly within half to all of this many seconds (0: never)")
	strip := flag.String("strip-shard-selector", "", "resources (a comma list, or *) whose shardSelector is dropped before the request goes upstream, as a server without ShardedListAndWatch ignores it")
	faults := flag.String("faults", strings.Join(append(append(append([]string{}, anyFaults...), readFaults...), watchFaults...), ","), "the faults to inject")
	flag.Parse()
	for _, r := range strings.Split(*strip, ",") {
		if r != "" {
			stripShard[r] = true
		}
	}
	log.SetFlags(0)
	if watchRate < 0 {
		watchRate = rate
	}
	rng = mrand.New(mrand.NewSource(*seed))
	for _, f := range strings.Split(*faults, ",") {
		if f != "" {
			enabled[f] = true
		}
	}
	var kc kubeconfig
	data, err := os.ReadFile(*upstream)
	if err != nil {
		log.Fatalf("chaos: %v", err)
	}
	if err := json.Unmarshal(data, &kc); err != nil || len(kc.Clusters) == 0 || len(kc.Users) == 0 {
		log.Fatalf("chaos: %s is not a kubeconfig of one cluster and user (%v)", *upstream, err)
	}
	tlsc := &tls.Config{}
	if ca := kc.Clusters[0].Cluster.CAData; ca != "" {
		pemCA, _ := base64.StdEncoding.DecodeString(ca)
		tlsc.RootCAs = x509.NewCertPool()
		tlsc.RootCAs.AppendCertsFromPEM(pemCA)
	}
	u := kc.Users[0].User
	if u.CertData != "" {
		c, _ := base64.StdEncoding.DecodeString(u.CertData)
		k, _ := base64.StdEncoding.DecodeString(u.KeyData)
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			log.Fatalf("chaos: the admin's client certificate: %v", err)
		}
		tlsc.Certificates = []tls.Certificate{pair}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsc, ForceAttemptHTTP2: true,
		MaxIdleConnsPerHost: 32}}
	p := &proxy{server: strings.TrimRight(kc.Clusters[0].Cluster.Server, "/"), token: u.Token, client: client}

	cert, caPEM := selfSigned()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("chaos: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	must(os.WriteFile(filepath.Join(*dir, "ca.crt"), caPEM, 0o644))
	must(os.WriteFile(filepath.Join(*dir, "kubeconfig"), []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: chaos
clusters: [{name: chaos, cluster: {server: "https://127.0.0.1:%d", certificate-authority: %q}}]
contexts: [{name: chaos, context: {cluster: chaos, user: chaos, namespace: default}}]
users: [{name: chaos, user: {token: chaos}}]
`, port, filepath.Join(*dir, "ca.crt"))), 0o600))
	must(os.WriteFile(filepath.Join(*dir, "port"), []byte(fmt.Sprintf("%d\n", port)), 0o644))
	srv := &http.Server{Handler: p, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog: log.New(io.Discard, "", 0)}
	log.Printf("chaos: listening on 127.0.0.1:%d, upstream %s, seed %d, rate %g", port, p.server, *seed, rate)
	log.Fatal(srv.ServeTLS(ln, "", ""))
}

func must(err error) {
	if err != nil {
		log.Fatalf("chaos: %v", err)
	}
}

// selfSigned makes the proxy's certificate, for 127.0.0.1, and its PEM.
func selfSigned() (tls.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chaos"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

type proxy struct {
	server, token string
	client        *http.Client
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/chaos/stats":
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(counts)
		return
	case "/chaos/pause", "/chaos/resume":
		mu.Lock()
		paused = r.URL.Path == "/chaos/pause"
		mu.Unlock()
		fmt.Fprintln(w, "ok")
		return
	}
	watch := isWatch(r)
	var fault string
	switch {
	case watch:
		fault = draw(watchRate, anyFaults, watchFaults)
	default:
		fault = draw(rate, anyFaults, readFaults)
	}
	if fault == "noend" && r.URL.Query().Get("sendInitialEvents") != "true" {
		fault = "" // (a plain watch has no end bookmark to drop)
	}
	// a watch's fault is counted where the stream applies it: one drawn
	// for a watch that answers no line after its moment, or is refused
	// upstream, never reaches luaop
	if fault != "" && (!watch || fault == "429" || fault == "503") {
		count(fault, r)
	}
	if fault == "429" || fault == "503" {
		code := 429
		reason := "TooManyRequests"
		if fault == "503" {
			code, reason = 503, "ServiceUnavailable"
		}
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"message":"chaos","code":%d}`, reason, code)
		return
	}
	body, _ := io.ReadAll(r.Body)
	uri := r.URL.RequestURI()
	if q := r.URL.Query(); q.Has("shardSelector") && (stripShard["*"] || stripShard[resourceOf(r.URL.Path)]) {
		q.Del("shardSelector")
		u := *r.URL
		u.RawQuery = q.Encode()
		uri = u.RequestURI()
		count("strip-shard-selector", r)
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.server+uri, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	for k, vs := range r.Header {
		switch strings.ToLower(k) {
		case "authorization", "accept-encoding", "connection", "content-length":
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		switch strings.ToLower(k) {
		case "content-length", "content-encoding", "transfer-encoding", "connection":
			continue
		}
		for _, v := range vs {
			w.Header()[k] = append(w.Header()[k], v)
		}
	}
	if watch && resp.StatusCode == 200 {
		p.stream(w, r, resp, fault)
		return
	}
	w.WriteHeader(resp.StatusCode)
	switch fault {
	case "reset":
		data, _ := io.ReadAll(resp.Body)
		w.Write(data[:len(data)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "slow":
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			w.Write(buf[:n])
			w.(http.Flusher).Flush()
			if err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	default:
		io.Copy(w, resp.Body)
	}
}

// stream forwards a watch line by line, with its fault.
func (p *proxy) stream(w http.ResponseWriter, r *http.Request, resp *http.Response, fault string) {
	fl := w.(http.Flusher)
	w.WriteHeader(200)
	fl.Flush()
	send := func(line []byte) {
		w.Write(line)
		fl.Flush()
	}
	switch fault {
	case "gone", "status":
		count(fault, r)
		code, reason, msg := 410, "Expired", "too old resource version: 1 (2)"
		if fault == "status" {
			code, reason, msg = 500, "InternalError", "chaos: an internal error"
		}
		send([]byte(fmt.Sprintf(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}}`+"\n", msg, reason, code)))
		return
	case "oversize":
		count(fault, r)
		big := append([]byte(`{"type":"ADDED","object":{"metadata":{"name":"`), bytes.Repeat([]byte("x"), 20<<20)...)
		send(append(big, []byte("\"}}}\n")...))
		return
	}
	lines := make(chan []byte, 1024)
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case lines <- line:
				case <-r.Context().Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var deadline <-chan time.Time
	if fault == "reset" || fault == "truncate" || fault == "garble" || fault == "stall" || fault == "dup" || fault == "reorder" {
		deadline = time.After(between(0.2, 3))
	}
	var cut <-chan time.Time
	if watchTimeout > 0 {
		cut = time.After(between(watchTimeout/2, watchTimeout))
	}
	armed := false // the fault applies to the next line (or now, for a reset)
	var held []byte
	for {
		select {
		case <-cut:
			if held != nil {
				send(held)
			}
			return
		case <-deadline:
			deadline = nil
			if fault == "reset" {
				count(fault, r)
				panic(http.ErrAbortHandler)
			}
			if fault == "stall" {
				count(fault, r)
				time.Sleep(3 * time.Second)
				continue
			}
			armed = true
		case line, ok := <-lines:
			if !ok {
				if held != nil {
					send(held)
				}
				return
			}
			if fault == "noend" && bytes.Contains(line, []byte(`"k8s.io/initial-events-end":"true"`)) {
				count(fault, r)
				continue
			}
			if !armed {
				send(line)
				continue
			}
			if fault != "reorder" || held != nil {
				count(fault, r)
			}
			switch fault {
			case "truncate":
				send(line[:len(line)/2])
				panic(http.ErrAbortHandler)
			case "garble":
				junk := append([]byte{}, line...)
				for i := 0; i < len(junk)-1; i += 7 {
					junk[i] = '}'
				}
				send(junk)
				armed = false
			case "dup":
				send(line)
				send(line)
				armed = false
			case "reorder":
				if held == nil {
					held = line
					continue
				}
				send(line)
				send(held)
				held = nil
				armed = false
			}
		}
	}
}
