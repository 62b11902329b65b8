# Test-only endpoints (routes exist only with RUVOY_TEST_PROBES set).
class ProbesController < ApplicationController
  skip_forgery_protection

  # Inserts a row in a transaction and holds it open for a while: which
  # database connection served it shows whether requests in flight share one.
  def transaction
    connection = nil
    Article.transaction do
      Article.create!(title: "tx #{params[:tag]}", body: "inserted inside a transaction")
      connection = Article.connection.select_value("SELECT pg_backend_pid()")
      sleep Float(params.fetch(:sleep, "0.1"))
    end
    render json: { connection: connection, tag: params[:tag] }
  end

  def pool
    render json: Article.connection_pool.stat
  end

  def count
    render json: { count: Article.where("title LIKE ?", "#{params[:prefix]}%").count }
  end

  # A request still under way when the server is told to stop
  # (test/container_test.go).
  def sleep_for
    sleep Float(params.fetch(:s, "1"))
    render plain: "slept"
  end

  # A child that starts a grandchild and exits: the grandchild, orphaned,
  # goes to PID 1 in a container. Its pid, as this process sees it.
  def orphan
    out = IO.popen(["sh", "-c", "sleep #{Float(params.fetch(:s, "1"))} >/dev/null 2>&1 & echo $!"], &:read)
    render plain: out.strip
  end

  # A file body Go sends (to_path), as send_file makes it.
  def send_file
    super Rails.root.join("public", "robots.txt"), type: "text/plain", disposition: "inline"
  end
end
