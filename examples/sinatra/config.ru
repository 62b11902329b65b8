# ruvoy examples/sinatra/config.ru (or: puma examples/sinatra/config.ru)
require_relative "app"
run Guestbook
