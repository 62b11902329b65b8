# Bundler is set up before this file runs because a Gemfile sits beside it.
run lambda { |env|
  body = "bundler=#{defined?(Bundler) ? File.basename(Bundler.default_gemfile) : "none"} " \
         "gems=#{Gem.loaded_specs.keys.sort.join(",")}"
  [200, { "content-type" => "text/plain" }, [body]]
}
