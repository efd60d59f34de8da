#include "server/hypervisor/xml_tags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

TEST(XmlTags, KindsNamesAndUnescapedAttributes) {
  const std::vector<XmlTag> tags = ReadXmlTags(
      "<?xml version='1.0'?><a x='1' y=\"&apos;&amp;&lt;\">text<!-- <b/> --><![CDATA[<c/>]]><d/></a>");
  ASSERT_EQ(tags.size(), 3u);
  EXPECT_EQ(tags[0].name, "a");
  EXPECT_EQ(tags[0].kind, XmlTag::Kind::kOpen);
  EXPECT_TRUE(tags[0].Is("x", "1"));
  ASSERT_NE(tags[0].Attribute("y"), nullptr);
  EXPECT_EQ(*tags[0].Attribute("y"), "'&<");
  EXPECT_EQ(tags[0].Attribute("z"), nullptr);
  EXPECT_FALSE(tags[0].Is("z", ""));
  EXPECT_EQ(tags[1].name, "d");
  EXPECT_EQ(tags[1].kind, XmlTag::Kind::kSelfClosing);
  EXPECT_EQ(tags[2].name, "a");
  EXPECT_EQ(tags[2].kind, XmlTag::Kind::kClose);
}

TEST(XmlTags, StopsAtTheFirstTagItCannotRead) {
  const std::vector<XmlTag> tags = ReadXmlTags("<a><b x=1/><c/></a>");
  ASSERT_EQ(tags.size(), 1u);
  EXPECT_EQ(tags[0].name, "a");
  EXPECT_TRUE(ReadXmlTags("<!-- never closed <a/>").empty());
  EXPECT_EQ(ReadXmlTags("<a x='unterminated/><b/>").size(), 0u);
}

}  // namespace
}  // namespace plimsoll::hypervisor
