#!/usr/bin/env python3
"""Build data/golden/colloquial_golden.jsonl (bench/query_rewrite.py reads it): `python3 bench/make_colloquial_golden.py`.

Selection is deterministic: for each golden file, sort ids by
sha256("colloquial:" + id) (hex digest) and take the first 90.
The colloquial texts below were written by hand; each entry is
(style_level, text) with style_level in {"L", "M", "H"}
(light / moderate / heavy colloquial), used only for reporting.
"""
import collections
import hashlib
import json
import sys
from pathlib import Path

GOLDEN = str(Path(__file__).resolve().parents[1] / "data" / "golden")
OUT = f"{GOLDEN}/colloquial_golden.jsonl"
N = 90

SAMPLE = {
    "s009": ("L", "麻烦问下，X-2000 的防护等级是多少呀？"),
    "s116": ("M", "Hey, sorry to bug you — a customer just asked me about the GR-3 gripper. Do you know how much it costs?"),
    "s038": ("H", "您好，我们仓库打算上几台 R-500，领导让我先把参数摸清楚。想请教一下，R-500 清洁的时候最大行驶速度是多少？"),
    "z09": ("L", "请问 X-2000 机械臂的重复定位精度能做到多少？谢谢"),
    "s061": ("H", "您好，我最近刚买了车，打算以后开车上班，不过听说园区附近路边不好停。公司员工停车位一个月要交多少钱啊？"),
    "a05": ("H", "Hi! Just got back from a work trip last week and I'm buried in emails, so I haven't done my expenses yet. How long after I get back do I have to submit the claim to still get my costs reimbursed?"),
    "s067": ("L", "不好意思，想問一下員工餐廳在幾樓呀？"),
    "n08": ("M", "Kind of embarrassing to ask since I've been here a month already, but who is actually the CEO of Northwind Robotics?"),
    "n01": ("H", "Hi, I'm on the phone with a customer right now and their X-2000 is throwing error code E-99. Do you know what that code means?"),
    "a07": ("M", "ugh, I typed my VPN password wrong too many times and now my account is locked. what am I supposed to do now?"),
    "s027": ("M", "我们车间地面经常有点积水，这种情况下还能用 R-500 吗？"),
    "n03": ("L", "Quick question — what's the list price of the X-3000 arm?"),
    "n23": ("H", "哈喽，今天周五下班早，想回家露一手给家里人做顿好的。红烧肉到底怎么做啊？"),
    "s127": ("L", "麻烦问下，广州服务中心的电话是多少？"),
    "s130": ("H", "Hi there, I took a few ride-hailing trips to client sites this month and I'm about to file my expenses. Do those rides need a special kind of receipt to get reimbursed, or is any receipt fine?"),
    "s118": ("M", "One of our distributors is thinking about ordering more than ten R-500 units. Do you happen to know if there's a volume discount for that?"),
    "s121": ("M", "您好，客戶在問 GR-2 電動夾爪的規格，想請教一下它的最大夾持力是多少？"),
    "s054": ("H", "我下个月要去西安出差一周，正在订酒店，怕订贵了报不了。想确认一下，在西安住酒店每晚最多能报多少？"),
    "n05": ("L", "请问一下，X-5000 机械臂的最大负载是多少？"),
    "s014": ("M", "Our plant has pretty strict noise rules, so I need to check: how loud is the X-2000 arm, in dB?"),
    "s041": ("L", "Hey, how many days of fully paid sick leave do we get per year?"),
    "s046": ("M", "Slightly awkward question, lol — I grabbed a couple of things from the hotel minibar on my last trip. Does the company reimburse minibar charges?"),
    "s157": ("H", "Hi, sorry to bother you. I'm trying to install some tools for a project and my work laptop keeps asking for an administrator password. How do I go about getting admin rights on it?"),
    "n22": ("L", "random one, but who won the 2022 FIFA World Cup final?"),
    "s123": ("H", "您好，我们有台设备要送修，我只有周末才有空跑一趟。想问问苏州服务中心周六开门吗？"),
    "s019": ("M", "我在规划产线布局，想知道 X-2000 机械臂跟 NC-7 控制器之间那根连接电缆有多长？"),
    "s114": ("L", "TP-20 示教器多少钱来着？"),
    "s042": ("H", "Morning — I've been down with a bad flu and it looks like I'll end up being out sick for three days. Do I need a doctor's note for that, or is telling my manager enough?"),
    "s109": ("L", "Hi, how much is the GR-2 electric gripper?"),
    "s007": ("M", "I need to cite the X-2000 datasheet in a report. Could you tell me what its document number is?"),
    "s033": ("H", "您好，我們商場的 R-500 剛剛突然停下來，螢幕上出現 E-72 錯誤代碼，同事都不知道怎麼回事。請問這個錯誤代碼是什麼意思？"),
    "s166": ("H", "Hi! Random HR question — I've barely been sick this year, so most of my sick days are just sitting there unused. Can I get the unused sick days paid out at the end of the year?"),
    "s119": ("L", "想问下，SP-1 服务计划能按月付款吗？"),
    "s155": ("M", "我刚转到运维组，还在熟悉环境。机房的监控系统用的是什么软件啊？"),
    "s146": ("H", "Hi! I'm putting together a maintenance schedule for the R-500 units at our site and I'm stuck on one item. How often are we supposed to replace the R-500's drive wheels?"),
    "s083": ("L", "请教下，备份恢复的演练多久做一次？"),
    "s102": ("H", "Hey, sorry for the rush — we've got a P1 incident going on right now and it's my first time being on call. At what point does a P1 incident get escalated to the infrastructure lead?"),
    "s177": ("M", "上周那个 P1 故障处理完了，接下来要开复盘会。不太确定 P1 故障的复盘会议一般是由谁来主持的？"),
    "s150": ("H", "Hi, I'm heading down to the Shenzhen assembly plant for a week of training and will probably be on site all day. When is the canteen at the plant open?"),
    "s006": ("L", "hey, how often should I be checking that the big red stop button on the X-2000 still works?"),
    "s040": ("L", "請問 R-500 的邊刷多久要換一次？"),
    "n07": ("M", "想买点自家公司的股票支持一下哈哈。北风机器人的股票代码是多少？"),
    "s002": ("L", "Quick one: how far can the X-2000 arm reach?"),
    "s072": ("M", "I need to courier some documents to the Shenzhen assembly plant. Do you know its street address?"),
    "s059": ("H", "您好，我下周一正式入职，HR 发的邮件里没写这个，心里有点没底。想了解一下新员工的试用期是多长时间？"),
    "s144": ("L", "Hi, what does error E-85 mean on the R-500?"),
    "s074": ("H", "您好，打扰一下。最近在和家里人算买房的首付和贷款，公积金这块我一直没搞明白。想问下咱们公司住房公积金的缴存比例是多少？"),
    "s043": ("H", "Hi, I'm moving a bit further out of the city next month and the commute is going to be brutal, so I'm trying to plan ahead. How many days a week am I allowed to work from home?"),
    "s101": ("M", "Setting up the VPN on my new laptop and not sure if it worked. What status should the NorthGate client show once the VPN is connected?"),
    "s087": ("L", "What's the response time for a P4 request? thanks!"),
    "s098": ("H", "Hi, sorry to bother you on a Friday evening. I'm setting up the VPN on my home PC so I can finish some work over the weekend, and it's asking for a server. What's the address of the company VPN server?"),
    "s129": ("M", "我們有客戶在廣州，想把設備帶過去維修。廣州服務中心的地址在哪裡呀？"),
    "s126": ("L", "麻煩問一下，蘇州服務中心的電話是多少？謝謝"),
    "s091": ("M", "我在整理故障分级的对照表，P5 级故障的响应时间是多少来着？"),
    "s018": ("M", "We're sorting out shipping for an NC-7 controller — do you know how much it weighs?"),
    "s147": ("H", "Hello! We're installing a CS-5 charging station at a new site and the electrician wants to know what to prepare before he comes in tomorrow. What input voltage does the CS-5 charging station need?"),
    "a11": ("L", "Can you give me the phone number of the Shenzhen service center?"),
    "n10": ("L", "好奇问一下，北风机器人一共有多少名员工呀？"),
    "z11": ("M", "改密码一直提示不合规，好烦。公司要求登录密码至少得多少位啊？"),
    "a13": ("M", "We want the R-500 cleaning robot to cover a whole night shift, so I'm wondering: how long does it run on a full battery charge?"),
    "s012": ("H", "您好，我们在做 X-2000 工位的安全评估，安全员问到了激光雷达这块。想请教一下，X-2000 的安全激光雷达在多近的距离会让机械臂停下来？"),
    "z04": ("L", "工作日加班的话，加班费咋算的？"),
    "s178": ("L", "Do you know how long VPN connection logs are kept?"),
    "s167": ("M", "这周项目赶进度，估计天天要加班到很晚。晚上加班的话公司提供晚饭吗？"),
    "s141": ("M", "Need to double-check something for a quote. What's the maximum payload of the GR-2 gripper?"),
    "s145": ("H", "您好，我们厂那几台 X-2000 用了挺久了，我在排今年的保养计划。想请教下 J4 到 J6 这几个关节多久需要重新润滑一次？"),
    "s107": ("M", "I'm based at the Suzhou R&D Center and the VPN feels slow from here. Is there a separate VPN gateway for the Suzhou R&D Center, or do we use the same one as everyone else?"),
    "s073": ("H", "这个问题有点敏感哈，家里最近有些变动，我在考虑换个城市发展。想私下问一下，辞职的话需要提前多久通知公司？"),
    "s017": ("L", "Hi, does the X-2000 controller support EtherCAT?"),
    "s055": ("M", "明天第一次去上海总部开会，怕走错地方。上海总部的地址在哪里？"),
    "s004": ("H", "Hi, sorry for the urgent ping. One of our X-2000 arms just stopped mid-cycle and it's reporting E-58. What should I be checking?"),
    "s081": ("L", "请问每天的增量备份会保留多久？"),
    "s085": ("H", "您好，我第一次当值班负责人，有点紧张，怕流程出错。想确认一下，发生 P1 故障的时候多久要通报一次进展？"),
    "s169": ("L", "咱们的 VPN 支持 IPv6 不？"),
    "s154": ("M", "审计那边来问我们的容灾指标，我不太确定 ERP 系统的恢复点目标（RPO）是多少，能帮我查一下吗？"),
    "s173": ("M", "We're running low on cleaning supplies and I want to reorder the right stuff. Which detergent should I put in the R-500's clean water tank?"),
    "s133": ("M", "刚才消防培训我走神了没听清，要是发现着火了应该打哪个内线电话？"),
    "s110": ("H", "Hi, one of our customers just had a controller fail and they want a backup on the shelf. If we order a spare NC-7 controller, what's the lead time?"),
    "s071": ("L", "麻烦问下，苏州研发中心的地址是啥？"),
    "s031": ("H", "Hi, quick logistics question. One of our customer sites has no freight elevator, so we might have to carry the R-500 cleaning robot up a flight of stairs. How much does it weigh?"),
    "a06": ("L", "how often do I have to change my password again?"),
    "s128": ("L", "What's the address of the Hangzhou service center, please?"),
    "s089": ("M", "我們這邊剛被定成 P2 級故障，客戶一直在催。想請問 P2 級故障的恢復目標是多久？"),
    "s148": ("H", "Hi, I'm on the road visiting customers most of the month, so my phone bill is getting pretty high. How much is the monthly mobile phone allowance?"),
    "s021": ("L", "R-500 的清水箱能装多少升水呀？"),
    "s120": ("M", "我们那台 R-500 的边刷磨得差不多了，想买个新的换上。R-500 的边刷配件多少钱？"),
    "s023": ("H", "您好，我们是医院后勤，病房走廊晚上也要清洁，护士长很担心吵到病人。想问下 R-500 工作时声音有多大？"),
    "s011": ("M", "产线上那台 X-2000 突然报了个 E-23 错误，这是啥意思啊？"),
    "s158": ("H", "唉，我这台电脑用了好几年了，开个表格都要卡半天，真的有点影响干活。想问下公司的笔记本电脑一般几年更换一次？"),
    "s052": ("L", "去杭州出差的话，每晚住宿标准是多少？谢谢啦"),
}

CORPUS = {
    "c056": ("L", "Hey, quick check on the grades table for me: which class is the student 孙悟空 in?"),
    "c045": ("M", "我在写读书笔记要标参考文献，想问下这本《资本论》中译本是哪家出版社出版的？"),
    "c143": ("L", "请问李博灏的本科是在英国哪所大学读的？"),
    "c092": ("H", "您好，我最近在用 vLLM 部署模型，想调一下显存占用，得先搞清楚几个参数。vLLM 默认的 KV cache block 大小是多少个 token 啊？"),
    "c044": ("M", "最近在啃政治经济学，有个概念老是搞不清：社会必要劳动时间，指的是在什么条件下所需要的劳动时间？"),
    "c022": ("L", "Hi, what's the arXiv identifier of the LayoutParser paper?"),
    "c026": ("H", "Hi, I'm pulling together references for a literature review and I have the paper on flow duration curves and afforestation, but I lost the citation details. Which journal was it published in?"),
    "c069": ("L", "請問《長安三萬里》的導演是誰呀？"),
    "c150": ("M", "在幫小孩檢查化學作業，突然有點不確定。葡萄糖分子裡到底有幾個氧原子？"),
    "c025": ("M", "I'm comparing retrievers for our search project. Do you know what top-20 retrieval accuracy DPR reaches on TriviaQA?"),
    "c101": ("L", "想问下 langchain-ChatGLM 的第 9999 号 issue 讲的是啥？"),
    "c015": ("H", "Hey, I'm building a quick valuation model for Galaxy Gaming and need the share count before I can get going. How many common shares did Galaxy Gaming have outstanding in March 2022?"),
    "c083": ("M", "刚刷到黄细花这个名字，有点好奇。黄细花是哪个省选出来的人大代表啊？"),
    "c028": ("H", "Hi, my manager asked me to write a short recap of the 5th International Conference on Applied Engineering and Natural Sciences for our newsletter. Any idea how many participants attended?"),
    "c002": ("L", "how many times did Iwan Roberts play for the Welsh national side? thanks"),
    "c099": ("M", "我在翻 langchain-ChatGLM 的历史 issue，翻到了第 48 号，想知道第 48 号 issue 问的是什么？"),
    "c070": ("H", "Hi! My kid's class is watching the animated film Chang'an next week and the teacher asked parents to help with a worksheet. How many poems and lyrics are featured in the film?"),
    "c133": ("L", "Do you know which engineer designed the LinnSequencer?"),
    "c141": ("M", "周末想带爸妈去看《长安三万里》，得算好时间。这部电影片长是多少分钟？"),
    "c111": ("H", "Hi, I'm prepping for a paralegal exam and this one keeps tripping me up. Which act was it that removed the bankruptcy judge from the day-to-day administration of cases?"),
    "c041": ("M", "We're putting up hygiene posters in the office. For how many seconds does the WHO infographic say to wash your hands?"),
    "c013": ("L", "IBM 现任的首席执行官是谁来着？"),
    "c131": ("H", "您好，我们组在挑文档版面分析的工具，老板想先看看各个开源项目的社区热度再定。LayoutParser 的 GitHub 仓库有多少个 star？"),
    "c140": ("H", "说来惭愧，中学学过的课文现在全忘了，昨天跟同事聊起来争了半天。《背影》里父亲去车站给作者买的到底是什么水果？"),
    "c016": ("L", "麻烦问下，Galaxy Gaming 公司的总部地址在哪？"),
    "c113": ("M", "I'm reading up on how chapter 13 works and got curious: what's the maximum annual compensation of a chapter 13 standing trustee?"),
    "c058": ("M", "Sorry if this is a dumb question — in the grades workbook, on the second sheet, who scored 99 points?"),
    "c093": ("H", "您好，我是刚转做向量检索的，组里天天在说 PQ，又不好意思一直问同事。想请教一下，乘积量化到底是怎么压缩向量的？"),
    "c034": ("L", "LinnSequencer 里面用的是啥处理器？"),
    "c091": ("M", "我们在考虑升级训练框架，想问下 FlashAttention-3 相比 FlashAttention-2 快了多少？"),
    "c155": ("H", "Ha, random one — a mate at the pub was telling me Iwan Roberts wrote a book about his missing front teeth. Do you know how much money he made from that book?"),
    "c104": ("L", "hey, do you know how many Stanley Cups the Montreal Canadiens have won?"),
    "c074": ("M", "I was skimming the Guangming article and missed the number. How fast does the International Space Station travel, according to it?"),
    "c116": ("L", "Do you know who translated this English edition of War and Peace?"),
    "c035": ("M", "I came across an old LinnSequencer at a flea market and got curious. What was the retail price of the LinnSequencer?"),
    "c151": ("H", "您好，我在寫一篇關於大模型訓練優化的綜述，需要引用原始出處。想請教一下 DeepSpeed 的 ZeRO-Offload 最早是在哪篇論文裡提出的？"),
    "c138": ("M", "我在准备下周的物理课，顺便想核对一下：幻灯片里说爱因斯坦提出质能方程时在哪所大学任职？"),
    "c128": ("L", "Quick one: who audits Galaxy Gaming's financial statements?"),
    "c081": ("M", "之前好像看過一則新聞，說有人大代表提議把法定婚齡降到18歲。是哪位人大代表提出的？"),
    "c068": ("L", "《长安三万里》的票房是多少啊？"),
    "c060": ("L", "請問趙雲的分數是多少？"),
    "c023": ("M", "I'm trying out LayoutParser for a document-parsing project. How many pre-trained models are in the LayoutParser Model Zoo?"),
    "c142": ("H", "哈喽，我昨天看了篇科普，讲到1985年那项高海拔饮酒研究，觉得挺有意思。想知道那项研究花了多少经费？"),
    "c129": ("H", "Hey, my boss wants a leverage comparison of a few gaming companies on her desk by tomorrow morning and I'm still missing some inputs. What was Galaxy Gaming's total debt at the end of 2021?"),
    "c062": ("M", "有个细节一下想不起来了：祖母去世那年，作者是从北京赶到哪里去见父亲的？"),
    "c095": ("M", "我們在評估要不要用 Milvus 存 embedding，想先確認一下，向量資料庫裡 Milvus 的最大支援維度是多少？"),
    "c158": ("H", "Hi! I've played keys for years but never touched a hardware sequencer, and I just got my hands on a LinnSequencer. How long does it take a musician to learn to use the LinnSequencer?"),
    "c157": ("L", "好奇问一句，宇航员要是在太空里喝醉了会受到什么处罚？"),
    "c112": ("H", "您好，我在帮律所整理美国破产法的资料，老板要求每条都标清出处。想请教一下，破产案件常设受托人的主要法定职责是规定在哪一条法律里的？"),
    "c018": ("L", "hi, what was Galaxy Gaming's net revenue for 2021?"),
    "c120": ("H", "There's a family of wild mallards at the pond outside our office and we've started naming them, lol. How long do wild mallards typically live?"),
    "c027": ("M", "Filling in a conference report for a colleague — where was the 5th International Conference on Applied Engineering and Natural Sciences held?"),
    "c077": ("L", "国际空间站上目前同时有几名宇航员呀？"),
    "c087": ("H", "Hi, we're debating FSDP vs DeepSpeed in our team meeting and I want to get the background right before I say anything. Which DeepSpeed technique is FSDP based on?"),
    "c123": ("L", "想問一下，化學方程式裡的「△H」代表什麼？"),
    "c011": ("H", "下个月可能要去美国出差，顺便拜访一下 IBM，行程还没定下来。想提前查一下，IBM 的总部设在哪里？"),
    "c030": ("H", "Hi, sorry to bother you — I'm the new IBM i admin here and a colleague needs access for database security admin work. Which CL command gives a user the QIBM_DB_SECADM function usage?"),
    "c107": ("M", "We're doing a silly quiz with the team about the duck's menu. How many calories per portion do berries have on it?"),
    "c125": ("L", "MinerU 的那个 DOCX 测试文档一共有多少页？"),
    "c075": ("M", "剛跟朋友聊到太空生活，大家都很好奇：國際空間站為什麼不讓宇航員喝酒？"),
    "c010": ("L", "What's the nickname IBM goes by again?"),
    "c119": ("H", "您好，我家孩子在做生物课的小报告，问我鸭子是哪个科的，我一下子答不上来。鸭子在生物分类上属于哪个科？"),
    "c059": ("L", "麻烦帮我查下，曹操的分数是多少？"),
    "c121": ("L", "葡萄糖分子里有几个碳原子来着？"),
    "c061": ("M", "最近在重读《背影》，有个地方想确认下：作者和父亲当时多久没见面了？"),
    "c053": ("H", "我在给公司年会准备一个科学家生平的小测验，题目得先核对一遍，免得闹笑话。爱因斯坦是哪一年获得诺贝尔物理学奖的？"),
    "c042": ("L", "hey, in the printed Wikipedia article, what does OCR stand for?"),
    "c029": ("M", "Putting together a slide on table recognition models. What BLEU score does TableFormer achieve?"),
    "c050": ("H", "Hi, I'm presenting in ten minutes and I left the sample presentation deck on my other laptop. What's the title of the fifth slide of the sample presentation deck?"),
    "c144": ("L", "DeepSpeed 是哪家公司开发的啊？"),
    "c037": ("M", "We're deciding which layout dataset to train on. How many pages does the DocLayNet dataset contain?"),
    "c004": ("H", "Hey, settling a debate in the office group chat — we've been arguing about old transfer fees all morning. How much did Leicester City pay to sign Iwan Roberts?"),
    "c136": ("M", "读书会要交报告，需要注明译本。这几页《资本论》的中文译者是谁？"),
    "c055": ("L", "孙悟空的语文成绩是多少分？"),
    "c098": ("H", "您好，我在给团队推荐学习资料，打算在分享的时候顺便感谢一下译者。这本提示工程指南的中文译者是谁呀？"),
    "c051": ("L", "请问幻灯片里说爱因斯坦是哪一年提出这个公式的？"),
    "c154": ("H", "Hi there, I'm writing a piece on Chinese animation and using the Xinhua commentary on Chang'an as one of my sources. What's the box-office gross of the film discussed in that commentary?"),
    "c039": ("H", "Hi! Our office manager asked me to put up a hand-hygiene reminder by the kitchen sink and wants it to match the official guidance. How should you clean your hands according to the WHO coronavirus infographic?"),
    "c064": ("H", "不好意思打擾一下，我在幫孩子複習國文，他問到《背影》的情節我也忘了。《背影》中父親辦完喪事之後要到哪裡謀事？"),
    "c038": ("L", "Do you know what share of the DocLayNet documents are in English?"),
    "c109": ("M", "I've got the Vodafone KPI pack open but it's a long one. On which page is mobile churn reported?"),
    "c031": ("L", "Who's the Chairman and Managing Director of Reliance Industries?"),
    "c132": ("H", "Hi! I'm preparing a market overview on Indian retail for a client meeting on Monday and need a couple of numbers. How many retail stores does Reliance Retail operate?"),
    "c067": ("M", "我想轉發新華網這篇《長安三萬里》的評論，想註明一下作者。這篇評論的記者是誰？"),
    "c108": ("L", "hey, on the duck's menu, how many calories per portion does fish have?"),
    "c020": ("M", "I'm filling in a trade ticket and need the identifier. What's Galaxy Gaming's CUSIP number?"),
    "c024": ("L", "Sorry, what does the acronym DPR stand for in the Karpukhin et al. paper?"),
    "c130": ("H", "Hey, I'm trying to reproduce DPR on our internal data and need to size the vector index before I start. What's the embedding dimension of DPR's passage encoder?"),
    "c097": ("M", "Our security team wants to read up on prompt attacks. Which chapter of the Chinese prompt-engineering guide covers adversarial prompts?"),
    "c094": ("M", "这个库名字挺逗的，Annoy 这个名字的全称是什么啊？"),
}

SETS = [
    # (source_set, input file, id prefix, hand-written texts)
    ("sample", f"{GOLDEN}/sample_golden.jsonl", "c-", SAMPLE),
    ("corpus", f"{GOLDEN}/corpus_golden.jsonl", "cc-", CORPUS),
]


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def select(records, n=N):
    key = lambda r: hashlib.sha256(("colloquial:" + r["id"]).encode("utf-8")).hexdigest()
    return sorted(records, key=key)[:n]


def build():
    out = []
    for source_set, path, prefix, texts in SETS:
        recs = load(path)
        chosen = select(recs)
        chosen_ids = [r["id"] for r in chosen]
        missing = [i for i in chosen_ids if i not in texts]
        extra = [i for i in texts if i not in set(chosen_ids)]
        if missing or extra:
            sys.exit(f"{source_set}: missing texts for {missing}; texts for unselected ids {extra}")
        for r in chosen:
            new = dict(r)
            new["id"] = prefix + r["id"]
            new["question"] = texts[r["id"]][1]
            new["variant_of"] = r["id"]
            new["source_set"] = source_set
            new["colloquial"] = True
            out.append(new)
    with open(OUT, "w", encoding="utf-8") as f:
        for r in out:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return out


# Characters that only exist in Simplified form (their Traditional form differs);
# used to sanity-check that Traditional-script originals stay Traditional.
SIMPLIFIED_ONLY = set("们这个说问请题么为时间里从对会来还过后发现场报价电话务设备员点门机钟带复习应该检确认谢难业关于写训练优综处论则闻议岁龄转评记编辑认识让国际资维数据库显页边换刚样头级层厅楼误码错帮学节扰剧丧办谋几")
ADDED = {"variant_of", "source_set", "colloquial"}


def validate():
    originals = {}
    for source_set, path, prefix, _ in SETS:
        for r in load(path):
            originals[(source_set, r["id"])] = r
    with open(OUT, encoding="utf-8") as f:
        lines = [l for l in f.read().split("\n") if l]
    assert len(lines) == 180, len(lines)
    recs = [json.loads(l) for l in lines]  # raises on invalid JSON
    ids = [r["id"] for r in recs]
    assert len(set(ids)) == len(ids), "duplicate ids"
    counts = collections.Counter()
    per_set = collections.Counter()
    levels = collections.Counter()
    texts = {"sample": SAMPLE, "corpus": CORPUS}
    for r in recs:
        o = originals[(r["source_set"], r["variant_of"])]
        prefix = "c-" if r["source_set"] == "sample" else "cc-"
        assert r["id"] == prefix + o["id"]
        assert set(r) == set(o) | ADDED, (r["id"], set(r) ^ (set(o) | ADDED))
        for k in o:
            if k not in ("id", "question"):
                assert r[k] == o[k], (r["id"], k)
        assert r["colloquial"] is True
        assert r["question"] != o["question"], r["id"]
        assert r["question"].strip() == r["question"] and r["question"]
        # language sanity: zh questions contain CJK, en questions are mostly ASCII
        cjk = sum(1 for ch in r["question"] if "\u4e00" <= ch <= "\u9fff")
        if o["lang"] == "zh":
            assert cjk >= 4, r["id"]
        else:
            assert cjk <= sum(1 for ch in o["question"] if "\u4e00" <= ch <= "\u9fff"), r["id"]
        if o["kind"] == "traditional":
            bad = [ch for ch in r["question"] if ch in SIMPLIFIED_ONLY and ch not in o["question"]]
            assert not bad, (r["id"], bad)
        # product codes / numbers / quoted titles of the original must survive
        import re
        tokens = re.findall(r"[A-Za-z]+-\d+|\d[\d,.]*|《[^》]+》|[A-Z]{2,}[A-Za-z0-9_\-]*", o["question"])
        for t in tokens:
            assert t in r["question"], (r["id"], t)
        counts[(r["source_set"], r["lang"], r["answerable"])] += 1
        per_set[r["source_set"]] += 1
        levels[(r["source_set"], texts[r["source_set"]][r["variant_of"]][0])] += 1
    print(f"OK: {len(recs)} lines, valid JSON, unique ids, fields preserved -> {OUT}")
    print("source_set  lang  answerable  count")
    for k in sorted(counts):
        print(f"{k[0]:<10}  {k[1]:<4}  {str(k[2]):<10}  {counts[k]}")
    print("per source_set:", dict(per_set))
    print("style levels (L/M/H):", dict(sorted(levels.items())))


if __name__ == "__main__":
    build()
    validate()
