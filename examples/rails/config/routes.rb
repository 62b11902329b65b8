Rails.application.routes.draw do
  root "articles#index"
  resources :articles

  # Endpoints the end-to-end tests use (test/rails_test.go), only when asked.
  if ENV["RUVOY_TEST_PROBES"]
    post "probes/transaction", to: "probes#transaction"
    get "probes/pool", to: "probes#pool"
    get "probes/count", to: "probes#count"
    get "probes/send_file", to: "probes#send_file"
  end
end
