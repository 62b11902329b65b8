# A small Sinatra 3 app: routes, params, JSON, a form POST, a streamed
# response, sessions and a 404. Served by ruvoy or any Rack server.
require "sinatra/base"
require "json"

class Guestbook < Sinatra::Base
  enable :sessions
  set :session_secret, ENV.fetch("SESSION_SECRET") { "x" * 64 }
  set :entries, []

  get "/" do
    session[:visits] = session.fetch(:visits, 0) + 1
    erb :index, locals: { entries: settings.entries, visits: session[:visits] }
  end

  get "/hello/:name" do
    "Hello, #{params[:name]}#{params[:greeting] ? " (#{params[:greeting]})" : ""}!"
  end

  get "/entries.json" do
    content_type :json
    JSON.generate(entries: settings.entries)
  end

  post "/entries" do
    text = params[:text].to_s.strip
    halt 422, "An entry needs some text." if text.empty?

    settings.entries << text
    redirect "/"
  end

  get "/countdown" do
    stream do |out|
      3.downto(1) do |n|
        out << "#{n}\n"
        sleep 0.1
      end
      out << "liftoff\n"
    end
  end

  not_found do
    "There is nothing at #{request.path_info}."
  end

  template :index do
    <<~ERB
      <!DOCTYPE html>
      <title>Guestbook</title>
      <p>Visit number <%= visits %> in this session.</p>
      <ul><% entries.each do |e| %><li><%= Rack::Utils.escape_html(e) %></li><% end %></ul>
      <form method="post" action="/entries"><input name="text"><button>Sign</button></form>
    ERB
  end
end
