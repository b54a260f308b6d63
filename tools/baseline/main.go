// Command baseline is the HTTP ceiling quotad is measured against: a bare
// echo/v4 server with one POST route answering a constant JSON body of
// about the size of a check answer (and one GET route answering one of
// about the size of an entitlements answer). Only for benchmarks.
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

// entitlements is about the size of quotad's answer to GET
// /v1/customers/{id}/entitlements for a customer of the benchmark's plan
// long (seven windows over four metrics), for the entitlements scenario.
const entitlements = `{"customer":"l42","plan":"long","status":"active","features":{},"limits":[` +
	`{"metric":"api_calls","window":"second","limit":1000000,"mode":"hard","used":12,"remaining":999988,"reset_at":"2026-11-22T10:00:01Z"},` +
	`{"metric":"api_calls","window":"day","limit":1000000000,"mode":"hard","used":5120,"remaining":999994880,"reset_at":"2026-11-23T00:00:00Z"},` +
	`{"metric":"credits","window":"second","limit":1000000,"mode":"hard","used":1,"remaining":999999,"reset_at":"2026-11-22T10:00:01Z"},` +
	`{"metric":"credits","window":"day","limit":1000000000,"mode":"hard","used":51,"remaining":999999949,"reset_at":"2026-11-23T00:00:00Z"},` +
	`{"metric":"exports","window":"second","limit":1000000,"mode":"hard","used":1,"remaining":999999,"reset_at":"2026-11-22T10:00:01Z"},` +
	`{"metric":"exports","window":"day","limit":1000000000,"mode":"hard","used":51,"remaining":999999949,"reset_at":"2026-11-23T00:00:00Z"},` +
	`{"metric":"tokens","window":"second","limit":1000000000,"mode":"hard","used":100,"remaining":999999900,"reset_at":"2026-11-22T10:00:01Z"}` +
	`],"grants":[]}`

func main() {
	addr := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/v1/check", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, []byte(answer))
	})
	e.GET("/v1/customers/:customer/entitlements", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, []byte(entitlements))
	})
	log.Fatal(e.Start(*addr))
}
