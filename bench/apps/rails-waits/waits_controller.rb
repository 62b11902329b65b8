# The benchmark's pages that wait, as production pages do (bench/waits.go
# copies this into the Rails fixture, with its routes and view): one whose
# query waits in PostgreSQL, one that calls an HTTP API first. Each then
# renders the first ten articles.
require "net/http"

class WaitsController < ApplicationController
  # GET /waits/db?ms=N: a query that takes N ms in the database
  # (pg_sleep), on a connection from the pool held for that query only.
  def db
    seconds = Integer(params.fetch(:ms, "5")) / 1000.0
    ActiveRecord::Base.connection_pool.with_connection do |c|
      c.select_value("SELECT 1 FROM pg_sleep(#{seconds})")
    end
    render_articles
  end

  # GET /waits/http: a call to an HTTP API (the benchmark's stand-in,
  # answering after 50 ms) through Net::HTTP, a connection a call, before
  # the page's query: no database connection is held while it waits.
  def http
    @upstream = Net::HTTP.get(URI(ENV.fetch("RUVOY_BENCH_UPSTREAM")))
    render_articles
  end

  private

  def render_articles
    @articles = Article.order(:id).limit(10).to_a
    render "waits/index"
  end
end
