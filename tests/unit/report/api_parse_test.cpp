// The API answer parsers: every malformed answer is an error naming what was wrong.
#include <gtest/gtest.h>

#include <cmath>

#include "report/canonical_answer.h"
#include "report/prom_api.h"

namespace gpumeter::report {
namespace {

std::string error_of(std::string_view body) {
  auto r = parse_query_response(body, "Q");
  return r.ok() ? std::string("ok") : r.error().message;
}

// parse_query_response() reads the usual shape itself and leaves the rest to the SAX reader:
// whichever reads an answer, the series or the error are the same.
void expect_same_as_sax(std::string_view body) {
  auto fast = parse_query_response(body, "Q");
  auto sax = parse_query_response_sax(body, "Q");
  ASSERT_EQ(fast.ok(), sax.ok()) << body;
  if (!fast.ok()) {
    EXPECT_EQ(fast.error().message, sax.error().message) << body;
    return;
  }
  ASSERT_EQ(fast->size(), sax->size()) << body;
  for (std::size_t i = 0; i < fast->size(); ++i) {
    EXPECT_EQ((*fast)[i].labels, (*sax)[i].labels) << body;
    ASSERT_EQ((*fast)[i].samples.size(), (*sax)[i].samples.size()) << body;
    for (std::size_t k = 0; k < (*fast)[i].samples.size(); ++k) {
      EXPECT_EQ((*fast)[i].samples[k].t, (*sax)[i].samples[k].t) << body;
      EXPECT_EQ((*fast)[i].samples[k].v, (*sax)[i].samples[k].v) << body;
      EXPECT_EQ(std::signbit((*fast)[i].samples[k].t), std::signbit((*sax)[i].samples[k].t)) << body;
      EXPECT_EQ(std::signbit((*fast)[i].samples[k].v), std::signbit((*sax)[i].samples[k].v)) << body;
    }
  }
}

TEST(ParseQueryResponse, TheUsualShapeIsReadAsTheSaxReaderReadsIt) {
  const std::string prometheus =
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"m","uuid":"GPU-1","pod":"p"},"values":[[1793365200,"1"],[1793376000,"2.5e3"],[1793386800.125,"-0"]]},{"metric":{"uuid":"GPU-2"},"values":[]}]}})";
  const std::string victoria =
      R"({"status":"success","isPartial":false,"data":{"resultType":"vector","result":[{"metric":{"a":"1","a":"2"},"value":[1.7e9,"0.1"]},{"metric":{"b":"1"},"value":[-0,"-0"]},{"metric":{"c":"1"},"value":[-0.0,"0"]}]}})";
  const std::string spaced =
      "{ \"status\" : \"success\" ,\n \"data\" : { \"resultType\" : \"matrix\" , \"result\" : [ { \"metric\" : "
      "{ } , \"values\" : [ [ 1 , \"1\" ] , [ 2 , \"2\" ] ] } ] } }\n";
  for (const auto& body : {prometheus, victoria, spaced}) {
    EXPECT_TRUE(read_canonical_answer(body).has_value()) << body;
    expect_same_as_sax(body);
  }
  // Left to the SAX reader: an escape, a byte above ASCII, a member it does not know, a number
  // JSON does not allow, a value that is no finite number, an envelope in another order.
  const std::vector<std::string> others = {
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"x\"y\u00e9"},"value":[1,"1"]}]}})",
      "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{\"a\":\"\xc3\xa9\"},"
      "\"value\":[1,\"1\"]}]}}",
      R"({"status":"success","stats":{"seriesFetched":"1"},"data":{"resultType":"vector","result":[]}})",
      R"({"status":"success","data":{"result":[],"resultType":"vector"}})",
      R"({"data":{"resultType":"vector","result":[]},"status":"success","warnings":["cut short"]})",
      R"({"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[01,"1"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1.,"1"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"values":[[1,"1"]]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"value":[1,"1"]}]}})",
      R"({"status":"success","data":{"resultType":"scalar","result":[1,"1"]}})",
      R"({"status":"error","errorType":"bad_data","error":"parse error"})",
      R"({"status":"success","data":{"resultType":"vector","result":[]}} trailing)",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}])",
      R"({"status":"success","data":{"resultType":"vector","result":[]}})",
  };
  for (const auto& body : others) {
    if (body != others.back()) {
      EXPECT_FALSE(read_canonical_answer(body).has_value()) << body;
    }
    expect_same_as_sax(body);
  }
  // What the checks after reading refuse, they refuse alike.
  expect_same_as_sax(
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[[1,"1"],[2,"3"],[2,"9"]]}]}})");
  expect_same_as_sax(
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"1"},"value":[1,"1"]}]}})");
}

TEST(ParseQueryResponse, VectorAndMatrix) {
  auto v = parse_query_response(
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"x","a":"1"},"value":[10.5,"2.25"]}]}})",
      "Q");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0].labels.count("__name__"), 0u);  // names are dropped: last_over_time drops them too
  EXPECT_EQ((*v)[0].labels.at("a"), "1");
  EXPECT_DOUBLE_EQ((*v)[0].samples[0].t, 10.5);
  EXPECT_DOUBLE_EQ((*v)[0].samples[0].v, 2.25);
  auto m = parse_query_response(
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"3e2"]]}]}})",
      "Q");
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ((*m)[0].samples[1].v, 300);
  auto empty = parse_query_response(R"({"status":"success","data":{"resultType":"vector","result":[]}})", "Q");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// A duplicated timestamp with another value multiplied every total by 2.2 with no warning: two
// values at one instant, time going back, or one series twice in an answer are refused, naming
// the series; the same sample repeated is harmless and dropped.
TEST(ParseQueryResponse, SamplesMustBeOnePerInstantInTimeOrder) {
  auto twice = parse_query_response(
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[[1,"1"],[2,"3"],[2,"3"],[3,"4"]]}]}})",
      "Q");
  ASSERT_TRUE(twice.ok()) << twice.error().message;
  EXPECT_EQ((*twice)[0].samples.size(), 3u);
  EXPECT_NE(
      error_of(
          R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[[1,"1"],[2,"3"],[2,"9"]]}]}})")
          .find("Q: the series {a=\"1\"} has two values at 2.000 (3 and 9)"),
      std::string::npos);
  EXPECT_NE(
      error_of(
          R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[[2,"1"],[1,"3"]]}]}})")
          .find("go back in time"),
      std::string::npos);
  EXPECT_NE(
      error_of(
          R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"2"]},{"metric":{"a":"1"},"value":[1,"5"]}]}})")
          .find("holds the series {a=\"1\"} twice"),
      std::string::npos);
}

// Thanos and Mimir answer a query some stores could not serve with the stores that could, and a
// warning: one series dropped took 5.8% off a bill with exit 0. Any warning, and a VictoriaMetrics
// cluster's isPartial, fails the answer, naming the warning; wherever the key comes.
TEST(ParseQueryResponse, WarningsAndPartialAnswersAreErrors) {
  const std::string data = R"("data":{"resultType":"vector","result":[]})";
  const std::string warned = R"("warnings":["partial response: store 10.0.0.7:10901 unavailable","w2"])";
  for (const std::string& body : {"{\"status\":\"success\"," + data + "," + warned + "}",
                                  "{" + warned + ",\"status\":\"success\"," + data + "}"}) {
    EXPECT_EQ(error_of(body),
              "Q: the API answered with a warning, so the answer may be incomplete: \"partial "
              "response: store 10.0.0.7:10901 unavailable\" (and 1 more)")
        << body;
  }
  EXPECT_NE(error_of(R"({"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}})")
                .find("Q: the API marked its answer as partial"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":{"resultType":"vector","result":[]},"warnings":[{"x":1}]})")
                .find("with a warning"),
            std::string::npos);
  // No warning, an empty list, isPartial false and Prometheus 3's infos are complete answers.
  for (const char* ok :
       {R"({"status":"success","warnings":[],"data":{"resultType":"vector","result":[]}})",
        R"({"status":"success","isPartial":false,"data":{"resultType":"vector","result":[]}})",
        R"({"status":"success","infos":["PromQL info: x"],"data":{"resultType":"vector","result":[]}})"}) {
    EXPECT_EQ(error_of(ok), "ok") << ok;
  }
  auto series = parse_series_response(R"({"status":"success","data":[],"warnings":["partial"]})", "S");
  ASSERT_FALSE(series.ok());
  EXPECT_NE(series.error().message.find("S: the API answered with a warning"), std::string::npos);
}

TEST(ParseQueryResponse, BadAnswers) {
  EXPECT_NE(error_of("<html>502 Bad Gateway</html>").find("Q: the answer is not JSON: \"<html>502"), std::string::npos);
  EXPECT_NE(error_of(R"([1,2])").find("no \"status\" field"), std::string::npos);
  EXPECT_NE(error_of(R"({"status":"error","errorType":"bad_data","error":"parse error at char 3"})")
                .find("status \"error\" (bad_data): parse error at char 3"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success"})").find("no \"data\" field"), std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":{"result":[]}})").find("no resultType"), std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":{"resultType":"scalar","result":[1,"2"]}})")
                .find("unexpected result type \"scalar\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":{"resultType":"string","result":[{"metric":{}}]}})")
                .find("unexpected result type \"string\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}})")
                .find("not a string"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}})")
          .find("unexpected sample value \"NaN\""),
      std::string::npos);
  EXPECT_NE(
      error_of(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"2"]}]}})")
          .find("label a is not a string"),
      std::string::npos);
  EXPECT_NE(
      error_of(R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{}}]}})").find("no values"),
      std::string::npos);
}

TEST(ParseQueryResponse, MembersInAnyOrderAndUnknownMembersSkipped) {
  // resultType after result, values before metric, and the extra members VictoriaMetrics
  // (isPartial, stats) and Prometheus (warnings, infos) add, with look-alike keys nested inside.
  // (A warning itself fails the answer: WarningsAndPartialAnswersAreErrors.)
  auto m = parse_query_response(
      R"({"data":{"result":[{"values":[[1700000000,"1.5"],[1700000300.25,"-2"]],"extra":{"metric":{"x":1}},)"
      R"("metric":{"__name__":"c","gpu":"0"}},{"metric":{"gpu":"1"},"values":[]}],"resultType":"matrix",)"
      R"("stats":{"seriesFetched":"2","result":[1]}},"isPartial":false,"warnings":[],"infos":["i"],"status":"success"})",
      "Q");
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].labels, (Labels{{"gpu", "0"}}));
  ASSERT_EQ((*m)[0].samples.size(), 2u);
  EXPECT_DOUBLE_EQ((*m)[0].samples[0].t, 1700000000);
  EXPECT_DOUBLE_EQ((*m)[0].samples[1].t, 1700000300.25);
  EXPECT_DOUBLE_EQ((*m)[0].samples[1].v, -2);
  EXPECT_TRUE((*m)[1].samples.empty());
  // A vector ignores a values list and takes its one value.
  auto v = parse_query_response(
      R"({"status":"success","data":{"result":[{"value":[5,"7"],"metric":{}}],"resultType":"vector"}})", "Q");
  ASSERT_TRUE(v.ok()) << v.error().message;
  ASSERT_EQ((*v)[0].samples.size(), 1u);
  EXPECT_DOUBLE_EQ((*v)[0].samples[0].v, 7);
}

TEST(ParseQueryResponse, MalformedPartsAreNamed) {
  const std::string head = R"({"status":"success","data":{"resultType":"matrix","result":[)";
  auto err = [&](std::string_view results) { return error_of(head + std::string(results) + "]}}"); };
  EXPECT_NE(err(R"({"metric":{},"values":[[1,"1","2"]]})").find("a sample is not [time, \"value\"]"),
            std::string::npos);
  EXPECT_NE(err(R"({"metric":{},"values":[[1]]})").find("a sample is not [time, \"value\"]"), std::string::npos);
  EXPECT_NE(err(R"({"metric":{},"values":[["1","1"]]})").find("a sample is not [time, \"value\"]"), std::string::npos);
  EXPECT_NE(err(R"({"metric":{},"values":[1]})").find("a sample is not [time, \"value\"]"), std::string::npos);
  EXPECT_NE(err(R"({"metric":{},"values":[[1,"1x"]]})").find("unexpected sample value \"1x\""), std::string::npos);
  EXPECT_NE(err(R"({"metric":{},"values":[[1,"+Inf"]]})").find("unexpected sample value \"+Inf\""), std::string::npos);
  EXPECT_NE(err(R"({"values":[]})").find("a result has no \"metric\""), std::string::npos);
  EXPECT_NE(err(R"({"metric":[],"values":[]})").find("\"metric\" is not an object"), std::string::npos);
  EXPECT_NE(err(R"({"metric":{"a":{"b":"c"}},"values":[]})").find("label a is not a string"), std::string::npos);
  EXPECT_NE(err(R"({"metric":{},"values":{}})").find("no values"), std::string::npos);
  EXPECT_NE(err(R"(7)").find("a result has no \"metric\""), std::string::npos);
  // The first problem is named, with the request.
  EXPECT_EQ(err(R"({"metric":{"a":1},"values":[[1,"x"]]})"), "Q: unexpected JSON: label a is not a string");
  // A body cut short is not JSON, even after a malformed part.
  EXPECT_NE(error_of(head + R"({"metric":{"a":1},"values":[[1,"1"],[2,)").find("the answer is not JSON"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":{"resultType":"vector","result":[]}} x)").find("not JSON"),
            std::string::npos);
  // The envelope comes first: an error status wins over a malformed data member.
  EXPECT_NE(error_of(R"({"data":7,"status":"error","error":"too many samples"})")
                .find("status \"error\" (unknown): too many samples"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"status":{"s":"success"},"data":{}})").find("status \"?\""), std::string::npos);
  EXPECT_NE(error_of(R"("success")").find("no \"status\" field"), std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":[]})").find("no resultType"), std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":{"resultType":"matrix","result":{}}})").find("no resultType"),
            std::string::npos);
}

TEST(ParseSeriesResponse, KeepsNames) {
  auto r = parse_series_response(
      R"({"status":"success","data":[{"__name__":"gpu_info","uuid":"GPU-1","model":"H100"}]})", "S");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].at("__name__"), "gpu_info");
  EXPECT_FALSE(parse_series_response(R"({"status":"success","data":{}})", "S").ok());
  auto bad = parse_series_response(R"({"status":"success","data":[{"a":"1"},"b"]})", "S");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("\"metric\" is not an object"), std::string::npos);
  auto two = parse_series_response(R"({"data":[{"__name__":"a"},{"x":"1","y":"2"}],"status":"success"})", "S");
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1], (Labels{{"x", "1"}, {"y", "2"}}));
}

TEST(ParseLabelValuesResponse, ReadsTheValuesAndRefusesOtherShapes) {
  auto r = parse_label_values_response(R"({"status":"success","data":["GPU-a","GPU-b"]})", "V");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  auto bad = parse_label_values_response(R"({"status":"success","data":["GPU-a",7]})", "V");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("V: unexpected JSON: a label value is not a string"), std::string::npos);
  EXPECT_FALSE(parse_label_values_response(R"({"status":"success","data":{}})", "V").ok());
  EXPECT_FALSE(parse_label_values_response(R"({"status":"error","error":"x"})", "V").ok());
  EXPECT_FALSE(parse_label_values_response(R"({"status":"success","data":[],"warnings":["partial"]})", "V").ok());
}

TEST(PromqlText, StringsAndAlternationsAreEscaped) {
  EXPECT_EQ(promql_string(R"(a"b\c)"), R"("a\"b\\c")");
  EXPECT_EQ(exact_alternation({"GPU-1.2", "x|y", "(z)"}), R"(GPU-1\.2|x\|y|\(z\))");
}

TEST(PromApi, ConnectRejectsBadUrls) {
  for (const char* url : {"localhost:9090", "ftp://h", "http://", "http://h/p?x=1"}) {
    auto api = PromApi::connect({url});
    EXPECT_FALSE(api.ok()) << url;
    if (!api.ok()) {
      EXPECT_NE(api.error().message.find("--url"), std::string::npos);
    }
  }
  EXPECT_TRUE(PromApi::connect({"https://user:pw@vm.example:8428/select/0/prometheus/"}).ok());
}

}  // namespace
}  // namespace gpumeter::report
