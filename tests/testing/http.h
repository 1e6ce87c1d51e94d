#pragma once
// A plain HTTP GET for tests that scrape /metrics, and a sample's value in the exposition.

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string>
#include <utility>

namespace gangrun::testing {

// GET http://127.0.0.1:port/target -> (status code, body); (0, error) when unreachable. With
// `authorization`, that header is sent ("Bearer X", "Basic ...").
inline std::pair<int, std::string> HttpGet(const std::string& port, const std::string& target,
                                           const std::string& authorization = "") {
  namespace http = boost::beast::http;
  try {
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    boost::beast::tcp_stream stream(io);
    stream.connect(resolver.resolve("127.0.0.1", port));
    http::request<http::empty_body> request(http::verb::get, target, 11);
    request.set(http::field::host, "127.0.0.1");
    if (!authorization.empty()) request.set(http::field::authorization, authorization);
    http::write(stream, request);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    return {response.result_int(), response.body()};
  } catch (const std::exception& e) {
    return {0, e.what()};
  }
}

// The value of the sample `name{labels}` in an exposition text, or -1 when absent.
inline double Sample(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

}  // namespace gangrun::testing
