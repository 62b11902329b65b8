# ruvoy examples/chat/config.ru (or: puma examples/chat/config.ru)
require_relative "app"
run Chat
