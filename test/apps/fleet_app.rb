# The app of the fleet tests (fleet_test.go), in two versions: fleet_v1.ru
# and fleet_v2.ru. FLEET_HOST names the host, so that a client behind the
# balancer can tell who answered. The balancer's health check, /up, is
# answered by ruvoy (--health-path), not here.
class FleetApp
  CHUNK = 1024

  def initialize(version)
    @name = "#{version} host=#{ENV.fetch("FLEET_HOST")}"
  end

  def call(env)
    query = Rack::Utils.parse_query(env["QUERY_STRING"])
    case env["PATH_INFO"]
    when "/"
      text("#{@name}\n")
    when "/stream"
      # n chunks of CHUNK bytes, a pause between: the client checks every
      # byte and that none is missing.
      n = Integer(query.fetch("n", "10"))
      [200, { "content-type" => "text/plain" }, Enumerator.new { |y|
        n.times do |i|
          sleep 0.05 if i > 0
          y << FleetApp.chunk(@name, i, n)
        end
      }]
    when "/echo"
      # A POST, which a balancer does not retry once sent.
      text("#{@name} #{env["rack.input"].read}\n")
    when "/ip"
      text(env["REMOTE_ADDR"])
    when "/xff"
      text(env.fetch("HTTP_X_FORWARDED_FOR", "(none)"))
    else
      [404, { "content-type" => "text/plain" }, ["not found\n"]]
    end
  end

  # The chunk i of n, as fleet_test.go's fleetChunk builds it.
  def self.chunk(name, i, n)
    line = "#{name} #{i}/#{n} "
    line + "." * (CHUNK - line.bytesize - 1) + "\n"
  end

  def text(s) = [200, { "content-type" => "text/plain" }, [s]]
end
