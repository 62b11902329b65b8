Rails.application.routes.draw do
  root "articles#index"
  resources :articles

  # Action Cable is mounted at /cable (its default mount path).
  resources :rooms, only: :show do
    resources :messages, only: :create
  end
  get "action_cable.js", to: "rooms#client"

  # Endpoints the end-to-end tests use (test/rails_test.go), only when asked.
  if ENV["RUVOY_TEST_PROBES"]
    post "probes/transaction", to: "probes#transaction"
    get "probes/pool", to: "probes#pool"
    get "probes/count", to: "probes#count"
    get "probes/send_file", to: "probes#send_file"
    get "probes/sleep", to: "probes#sleep_for"
    get "probes/orphan", to: "probes#orphan"
  end
end
