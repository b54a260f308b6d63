// Command baseline is the HTTP ceiling quotad is measured against: a bare
// echo/v4 server with one POST route answering a constant JSON body of
// about the size of a check answer. Only for benchmarks.
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/labstack/echo/v4"
)

const answer = `{"allowed":true,"customer":"c42","metric":"api_calls","cost":1,"overage":false,` +
	`"elastic":false,"retry_after":0,"degraded":false,"limits":[{"window":"second","limit":1000,"used":12,` +
	`"remaining":988,"reset_at":"2026-11-22T10:00:01Z","mode":"hard","state":"ok"},{"window":"day",` +
	`"limit":1000000,"used":5120,"remaining":994880,"reset_at":"2026-11-23T00:00:00Z","mode":"hard","state":"ok"}]}`

func main() {
	addr := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/v1/check", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, []byte(answer))
	})
	log.Fatal(e.Start(*addr))
}
