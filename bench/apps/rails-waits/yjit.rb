# YJIT as the benchmark's server is started: on with RUBY_YJIT_ENABLE=1,
# for every server alike, else off. Rails 7.2 would turn it on by itself
# where the Ruby has it (config.yjit); Rails 6.1 has no such setting.
Rails.application.config.yjit = ENV["RUBY_YJIT_ENABLE"] == "1"
